"""The example outputs of the docs, produced by the code: every fenced block that follows a marker

    <!-- output: jaxparity explain examples/conv_bf16.py --paths eager,jit -->

in README.md and docs/*.md is the standard output of that command, run from the repository's root at 80
columns (as a CI log shows it). ``python docs/generate.py`` rewrites the blocks; ``--check`` (``make test``,
``tests/test_docs.py``) fails on any block that differs from what the command prints now, so a change in output
that the docs do not show fails CI. Only ``jaxparity`` commands are run; each once per run, however many pages
show it.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- output: (?P<command>jaxparity [^>]*?) -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$",
                    re.M | re.S)

__all__ = ["pages", "output", "regenerate"]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def output(command: str, cache: dict[str, str]) -> str:
    """The command's standard output at 80 columns, without colour, run from the repository's root."""
    if command not in cache:
        args = shlex.split(command)
        env = dict(os.environ, COLUMNS="80", NO_COLOR="1", TERM="dumb")
        env.pop("FORCE_COLOR", None)
        done = subprocess.run([sys.executable, "-m", "jaxparity", *args[1:]], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=900)
        if done.returncode not in (0, 1) or "Traceback (most recent call last)" in done.stderr or \
                not done.stdout.strip():
            raise RuntimeError(f"{command}: exit status {done.returncode}\n{done.stderr[-2000:]}")
        cache[command] = done.stdout.rstrip("\n") + "\n"
    return cache[command]


def regenerate(page: Path, cache: dict[str, str]) -> tuple[str, str]:
    """(the page as it is, the page with every marked block the command's output now)."""
    text = page.read_text()

    def fill(m: re.Match) -> str:
        return (f"<!-- output: {m['command']} -->\n```{m['lang'] or 'text'}\n"
                f"{output(m['command'], cache)}```")

    return text, MARKER.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where a block is stale")
    parser.add_argument("pages", nargs="*", type=Path, help="pages to do (default: README.md and docs/*.md)")
    args = parser.parse_args(argv)
    cache: dict[str, str] = {}
    stale = 0
    for page in args.pages or pages():
        before, after = regenerate(page, cache)
        if before == after:
            continue
        stale += 1
        if args.check:
            diff = difflib.unified_diff(before.splitlines(), after.splitlines(), f"{page} (as written)",
                                        f"{page} (as the code prints it now)", lineterm="", n=2)
            print("\n".join(diff))
        else:
            page.write_text(after)
            print(f"rewrote {page.relative_to(ROOT)}")
    if args.check and stale:
        print(f"\n{stale} page(s) show output the code no longer prints: run `python docs/generate.py`")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
