"""Docs that stay true: the README an entrance of at most 250 lines, every link of the docs resolving, and every
example output in them the one the code prints now (``docs/generate.py --check``)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_an_entrance_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text
    assert "<!-- output: jaxparity " in text  # one real output, produced by the code


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_of_the_docs_resolves(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name} links to {target}, which is not there"


def test_every_marked_output_is_a_command_on_files_that_exist():
    sys.path.insert(0, str(ROOT / "docs"))
    from generate import MARKER

    found = 0
    for page in PAGES:
        for m in MARKER.finditer(page.read_text()):
            found += 1
            for arg in m["command"].split()[1:]:
                path = arg.split(":", 1)[0]
                if path.endswith(".py"):
                    assert (ROOT / path).exists(), f"{page.name}: {m['command']} names {path}, not there"
    assert found


@pytest.mark.slow
def test_the_docs_show_what_the_code_prints():
    """A change in output that the docs do not show fails here: `python docs/generate.py` brings them in line."""
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"], capture_output=True,
                          text=True, cwd=ROOT, timeout=1800)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
