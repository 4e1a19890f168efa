"""Running one measurement in a fresh Python process: the benchmarks' shared helper."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_fresh(code: str, *argv: str) -> dict:
    """Run ``code`` with ``argv`` in a fresh interpreter at the repository root; the JSON object it
    prints last is the measurement."""
    r = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])
