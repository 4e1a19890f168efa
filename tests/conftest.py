import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CASES = Path(__file__).resolve().parent / "cases"
# Keras 3 picks its backend once, when first imported: the suite's Keras models (test_cases.py) run on JAX.
os.environ.setdefault("KERAS_BACKEND", "jax")
# Every result the suite produces, in this process and in the commands it runs, has its verdicts checked against
# their invariants (``jaxparity.verdict.violations``): one that breaks one is an error, not a report.
os.environ["JAXPARITY_STRICT_VERDICTS"] = "1"


def _session_cache() -> None:
    """The suite runs with jaxparity's cache on, as users do, in a cache of its own: it starts empty, so a
    test never meets a model converted by an earlier session's code. The virtual environments of
    ``--env`` (minutes to build) are the user's, shared through a link."""
    import tempfile

    if os.environ.get("JAXPARITY_TEST_CACHE_SET"):
        return  # a subprocess of the suite (its workers, run_cli): the session's cache is set
    shared = Path(os.environ.get("JAXPARITY_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                           Path.home() / ".cache") / "jaxparity")
    own = Path(tempfile.mkdtemp(prefix="jaxparity-test-cache-"))
    (shared / "envs").mkdir(parents=True, exist_ok=True)
    (own / "envs").symlink_to(shared / "envs")
    os.environ.update(JAXPARITY_CACHE=str(own), JAXPARITY_TEST_CACHE_SET="1")
    _OWN.append(own)


_OWN: list[Path] = []
_session_cache()


def pytest_sessionfinish(session, exitstatus):
    """The session's own cache goes with it (the link to the shared environments, not what it points to)."""
    import shutil

    from jaxparity.execution.warm import stop_daemons

    for own in _OWN:
        stop_daemons(own / "serve")  # the serving processes the session's commands left for the next one
        shutil.rmtree(own, ignore_errors=True)


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the installed ``jaxparity`` command as a user would."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "jaxparity", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def valid_result(doc: dict) -> dict:
    """``doc`` (a result read back from ``--json``), validated against the published schema."""
    import json
    from importlib import resources

    import jsonschema

    jsonschema.validate(doc, json.loads(resources.files("jaxparity").joinpath("schema/result-v1.json").read_text()))
    return doc


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
