"""A long run of the tool's own fuzzer (issue 55, ``tests/test_fuzz.py``): N random programs compared and
explained, every invariant checked on each; failures are printed as the program that breaks them
(``Program.literal()``, to keep as a regression in tests/test_fuzz.py) and counted by what they break.

    python benchmarks/fuzz.py [--programs N] [--seed S] [--paths eager,jit]

Prints one line per failing program, then: programs run, programs that failed, distinct failures, and the
program index of the last new one (a run is clean when nothing new came in its last thousand programs).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

import jaxparity  # noqa: E402
from programs import invariants, programs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paths", default="eager,jit")
    args = parser.parse_args()
    paths = args.paths.split(",")
    seen: dict[str, int] = {}  # what broke (numbers and names taken out) -> the program index that first broke it
    count, failed, start = 0, 0, time.monotonic()
    kinds: dict[str, int] = {}

    @seed(args.seed)
    @settings(max_examples=args.programs, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(programs())
    def run(program):  # noqa: ANN001
        nonlocal count, failed
        count += 1
        try:
            result = jaxparity.compare(program.fn(), *program.args(), paths=paths).explain()
            for v in result.verdicts:
                kinds[v.kind] = kinds.get(v.kind, 0) + 1
            broken = invariants(result)
        except Exception as e:  # noqa: BLE001 - a tool error is the worst failure: counted, the run goes on
            broken = [f"raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
        if broken:
            failed += 1
            for b in broken:
                key = re.sub(r"[\d.e+-]+|#\d+ \w+|\w+\.py:\d+", "#", b)[:160]
                if key not in seen:
                    seen[key] = count
                    print(f"program {count}: {b}\n  {program.literal()}", flush=True)

    run()
    last = max(seen.values(), default=0)
    print(f"{count} programs on {args.paths} in {time.monotonic() - start:.0f} s: {failed} failed, "
          f"{len(seen)} distinct failures, the last new one at program {last}; verdicts: "
          + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))


if __name__ == "__main__":
    main()
