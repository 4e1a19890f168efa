"""The terminal report read in a narrow CI log: no cell breaks inside a word or a number, and values
that look like markup ("[nan]") are printed, not swallowed."""

import re

import jax.numpy as jnp
import numpy as np

import jaxparity
from jaxparity.report.terminal import render_text


def _result():
    def fn(x):
        return jnp.log(x - 2.0), x * 3.0

    return jaxparity.compare(fn, jnp.float32(1.0), paths=["eager", "jit"])


def test_a_nan_scalar_prints_as_nan():
    text = render_text(_result(), width=100)
    assert re.search(r"eager out/0\s+\[nan\]", text), text


def test_80_columns_keep_every_cell_whole():
    x = jnp.asarray(np.random.default_rng(0).standard_normal(64).astype(np.float32))
    result = jaxparity.compare(lambda a, b, c, d: (a * b - c * d, jnp.tanh(a * b - c * d)), x, x[::-1], x * 0.5, x + 1.0,
                               paths=["eager", "jit", "declared"])
    text = render_text(result, width=80)
    table = text.split("\n\n")[1]
    assert max(len(line) for line in table.splitlines()) <= 80
    rows = [line for line in table.splitlines() if "│" in line and line.split("│")[0].strip()]
    assert len(rows) == 4
    for line in rows:  # one line per path: nothing folded onto the next line
        cells = [c.strip() for c in line.split("│")]
        assert cells[0] in ("eager", "jit", "declared", "f64"), line
        assert cells[1] in ("baseline", "identical", "equal", "DIFFERS", "within tolerance"), line


def test_a_failing_baseline_is_said_plainly(tmp_path):
    from jaxparity.report.format import summary_line

    missing = tmp_path / "nothing.npz"
    result = jaxparity.compare(lambda x: x * 2.0, jnp.arange(3.0), paths=[f"observed:{missing}", "eager"],
                               baseline=f"observed:{missing}")
    line = summary_line(result)
    assert line.startswith(f"the baseline observed:{missing} failed") and "choose another --baseline" in line
    assert "do not agree" not in line


def test_explanation_tables_at_80_columns_keep_words_whole():
    """Tables that cannot fit without breaking a word are stacked as lines; the op, its types and the
    line of source stay whole."""
    from pathlib import Path

    from jaxparity.case import load_case

    case = load_case(f"{Path(__file__).parent / 'cases' / 'planted.py'}:make_fma")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"]).explain()
    text = render_text(result, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    local = [line for line in text.splitlines() if line.startswith("#: ")]
    assert local, text
    flat = " ".join(text.split())  # rejoin wrapped lines: wrapping may only happen at spaces
    assert "float32[1000],float32[1000]->float32[1000]" in flat
    assert re.search(r"line: \S*planted\.py:\d+", flat)
