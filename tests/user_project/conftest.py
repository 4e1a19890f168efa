"""An example user project with a deliberately failing test: it runs only as its own pytest
project (``cd tests/user_project && pytest -p jaxparity.pytest_plugin``, as tests/test_testing.py
does), never as part of jaxparity's own test suite."""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path, config):
    if config.rootpath.resolve() != HERE:
        return True
    return None
