"""Seconds loading a case takes in a fresh process, with JAX's persistent cache empty and then holding what
the first load compiled (what each explain worker pays before any path runs).

    python benchmarks/models/load_time.py benchmarks/models/keras_mobilenetv3.py
"""

import os
import subprocess
import sys
import tempfile

ONE = """
import sys, time
from jaxparity.cache import jax_cache
from jaxparity.case import load_case
jax_cache()
t = time.perf_counter()
load_case(sys.argv[1], None)
print(f"{time.perf_counter() - t:.1f}")
"""

if __name__ == "__main__":
    env = dict(os.environ, JAXPARITY_CACHE=tempfile.mkdtemp(), KERAS_BACKEND="jax")
    for label in ("cold (JAX's cache empty)", "again (JAX's cache holds its compiles)"):
        run = subprocess.run([sys.executable, "-c", ONE, sys.argv[1]], env=env, capture_output=True, text=True)
        print(f"{os.path.basename(sys.argv[1])} load {label}: "
              f"{run.stdout.strip() or 'failed: ' + run.stderr[-400:]} s")
