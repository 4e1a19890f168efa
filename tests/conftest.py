import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CASES = Path(__file__).resolve().parent / "cases"


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the installed ``jaxparity`` command as a user would."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "jaxparity", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture(scope="session")
def examples() -> Path:
    return EXAMPLES


@pytest.fixture(scope="session")
def cases() -> Path:
    return CASES


@pytest.fixture(scope="session")
def seed_explained():
    """The seed case (examples/conv_bf16.py) compared on eager, jit and declared, and explained."""
    import jaxparity
    from jaxparity.case import load_case

    case = load_case(str(EXAMPLES / "conv_bf16.py"))
    return jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "declared"]).explain()


# tests/user_project is an example user project with a deliberately failing test; it runs only as
# its own pytest project (see test_testing.py), never as part of this suite.
collect_ignore = ["user_project"]
