"""Where a divergence is planted: the line of a case file marked ``# planted: <what>``. Tests find the
number from the comment, so editing a case file cannot silently break what they check."""

from pathlib import Path


def planted_line(case_file: Path, what: str) -> str:
    """``"loops.py:22"`` for the line of ``case_file`` that carries ``# planted: <what>``."""
    for number, line in enumerate(case_file.read_text().splitlines(), start=1):
        if f"# planted: {what}" in line:
            return f"{case_file.name}:{number}"
    raise AssertionError(f"no line of {case_file.name} planted with {what}")
