"""Running a path in another environment: creation time, and per-call overhead against in-process.

Measured side by side in one run: the same path (`eager` on the seed case) run N times
(a) in this process, (b) in a worker of this environment, (c) in a worker of the `old` environment
(jax 0.4.38), counting the worker's start (Python, JAX import, case load) separately from the
per-call cost once it runs. Creation time is read from the environment's manifest (built once).

Usage: python benchmarks/bench_envs.py [--calls N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from jaxparity.case import load_case  # noqa: E402
from jaxparity.execution.envs import ensure_env, manifest, parse_env, register, worker_environment  # noqa: E402
from jaxparity.execution.isolated import IsolatedRunner  # noqa: E402
from jaxparity.execution.inprocess import run_in_process  # noqa: E402
from jaxparity.paths import make_path  # noqa: E402

OLD = parse_env("old=jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0")
CASE = str(ROOT / "examples" / "conv_bf16.py")


def timed_worker(runner: IsolatedRunner, spec: str, calls: int) -> tuple[float, list[float]]:
    t = time.perf_counter()
    runner.load()
    start = time.perf_counter() - t
    per_call = []
    for _ in range(calls):
        t = time.perf_counter()
        run = runner.run(spec)
        assert run.status == "ok", run.message
        per_call.append(time.perf_counter() - t)
    return start, per_call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    t = time.perf_counter()
    python = ensure_env(OLD)
    check = time.perf_counter() - t
    created = manifest(OLD).get("seconds")

    case = load_case(CASE)
    in_process = []
    for _ in range(args.calls + 1):
        t = time.perf_counter()
        run_in_process(make_path("eager"), case.fn, case.args)
        in_process.append(time.perf_counter() - t)
    in_process = in_process[1:]  # first call compiles the ops, as the workers' first call does
    with IsolatedRunner(CASE) as here:
        here_start, here_calls = timed_worker(here, "eager", args.calls + 1)
    with IsolatedRunner(CASE, python=str(python), env=worker_environment(register([OLD]))) as old:
        old_start, old_calls = timed_worker(old, "eager@old", args.calls + 1)
    med = statistics.median
    result = {
        "env_created_s": created, "env_reuse_check_s": check,
        "in_process_call_s": med(in_process),
        "worker_here": {"start_s": here_start, "first_call_s": here_calls[0], "call_s": med(here_calls[1:])},
        "worker_old": {"start_s": old_start, "first_call_s": old_calls[0], "call_s": med(old_calls[1:])},
    }
    over = med(old_calls[1:]) - med(in_process)
    print(f"environment old: created once in {created:.0f} s; reused after a {1000 * check:.1f} ms check")
    print(f"eager on the seed case, per call once warm: in process {1000 * med(in_process):.1f} ms, worker here "
          f"{1000 * med(here_calls[1:]):.1f} ms, worker in old {1000 * med(old_calls[1:]):.1f} ms: overhead "
          f"{1000 * over:.1f} ms per call (target <= 1 s)")
    print(f"starting a worker (Python, JAX import, case load): here {here_start:.2f} s, old {old_start:.2f} s "
          "(once per environment per command)")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
