"""A warm session in Python, measured side by side in one run (each scenario in a fresh interpreter):

- notebook: `jaxparity.compare` of examples/transformer_bf16.py (its default paths) in one Python
  process, then the same again (target <= 0.3x the first), then after a weight change (<= 0.6x);
- pytest: a session of 10 `assert_parity` tests on savedmodel (10 models of the same shapes, other
  weights) against a session of one (target <= 2.5x).

Each round starts from an empty jaxparity cache; rounds alternate; the medians are reported.

Usage: python benchmarks/bench_warm.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOK = '''
import json, sys, time
sys.path.insert(0, {root!r})
import jax
import jaxparity
from jaxparity.case import load_case
case = load_case({case!r})
times = []
for args in (case.args, case.args, jax.tree_util.tree_map(lambda a: a * 1.01 if a.dtype.kind == "f" else a, case.args)):
    start = time.perf_counter()
    jaxparity.compare(case.fn, *args)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
'''

TESTS = '''
import jax.numpy as jnp
import numpy as np
import pytest
from jaxparity.testing import assert_parity


@pytest.mark.parametrize("seed", range({n}))
def test_mlp(seed):
    rng = np.random.default_rng(seed)
    w1 = jnp.asarray(rng.standard_normal((64, 128)) / 8, jnp.float32)
    w2 = jnp.asarray(rng.standard_normal((128, 10)) / 11, jnp.float32)
    x = jnp.asarray(rng.standard_normal((16, 64)), jnp.float32)
    assert_parity(lambda w1, w2, x: jnp.tanh(x @ w1) @ w2, w1, w2, x, paths=["eager", "savedmodel"], rtol=1e-4,
                  explain=False)
'''


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, JAXPARITY_CACHE=str(cache))
    env.pop("JAXPARITY_NO_CACHE", None)
    return env


def _fresh_cache() -> Path:
    cache = Path(tempfile.mkdtemp(prefix="bench-warm-"))
    shared = Path(os.environ.get("JAXPARITY_CACHE") or Path.home() / ".cache" / "jaxparity") / "envs"
    if shared.exists():
        (cache / "envs").symlink_to(shared)
    return cache


def notebook(case: str) -> list[float]:
    cache = _fresh_cache()
    try:
        done = subprocess.run([sys.executable, "-c", NOTEBOOK.format(root=str(ROOT / "src"), case=case)],
                              env=_env(cache), capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            raise SystemExit(done.stderr[-2000:])
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def pytest_session(n: int) -> float:
    cache, tests = _fresh_cache(), Path(tempfile.mkdtemp(prefix="bench-tests-"))
    try:
        (tests / "test_parity.py").write_text(TESTS.format(n=n))
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
                              env=_env(cache), capture_output=True, text=True, cwd=tests)
        seconds = time.perf_counter() - start
        if done.returncode:
            raise SystemExit(done.stdout[-3000:])
        return seconds
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(tests, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case", default=str(ROOT / "examples" / "transformer_bf16.py"))
    a = ap.parse_args()
    calls: list[list[float]] = []
    sessions: dict[int, list[float]] = {1: [], 10: []}
    for _ in range(a.repeat):
        calls.append(notebook(a.case))
        for n in (1, 10):
            sessions[n].append(pytest_session(n))
    first, second, changed = (statistics.median(c[i] for c in calls) for i in range(3))
    one, ten = statistics.median(sessions[1]), statistics.median(sessions[10])
    print(f"{a.repeat} rounds, medians (seconds):")
    print(f"  notebook: first compare {first:.2f}, second {second:.2f} ({second / first:.2f}x), after a weight "
          f"change {changed:.2f} ({changed / first:.2f}x)")
    print(f"  pytest: 1 assert_parity test on savedmodel {one:.2f}, 10 tests {ten:.2f} ({ten / one:.2f}x)")


if __name__ == "__main__":
    main()
