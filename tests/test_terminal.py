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
    text = render_text(_result(), width=100, verbose=True)
    assert re.search(r"eager out/0\s+\[nan\]", text), text


def test_the_time_column_is_verboses():
    """A path's seconds move with the machine's load: the default report leaves them out, at any width, and
    says nothing about it; --verbose shows them where they fit."""
    result = _result()
    for width in (80, 200):
        text = render_text(result, width=width)
        assert " time" not in text.split("\n\n")[1] and "time left out" not in text, text
    assert re.search(r"f64 ULP\s+┃\s+time", render_text(result, width=200, verbose=True))


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
        assert cells[1] in ("baseline", "identical", "equal", "DIFFERS", "within tolerance") or (
            cells[1] == "differs" and cells[0] in ("declared", "f64")), line  # a reference: never in capitals


def test_a_header_fact_that_wraps_stays_in_its_column():
    """A model's inputs wrap under the first line's text, never back to the margin, where they would read as
    another header ("inputs", "outputs", "baseline")."""
    x = jnp.ones(3, jnp.float32)
    args = {f"layer_{i}": {"kernel": x, "bias": x} for i in range(8)}
    result = jaxparity.compare(lambda p, y: sum(v["kernel"] * y for v in p.values()), args, x, paths=["eager", "jit"])
    head = render_text(result, width=60, verbose=True).split("\n\n")[0].splitlines()
    start = next(i for i, line in enumerate(head) if line.startswith("inputs   "))
    end = next(i for i, line in enumerate(head) if line.startswith("outputs  "))
    assert end - start > 1, head  # it wrapped
    assert all(line.startswith(" " * 9) and line[9] != " " for line in head[start + 1:end]), head


def test_a_failing_baseline_is_said_plainly(tmp_path):
    from jaxparity.report.format import summary_line

    missing = tmp_path / "nothing.npz"
    result = jaxparity.compare(lambda x: x * 2.0, jnp.arange(3.0), paths=[f"observed:{missing}", "eager"],
                               baseline=f"observed:{missing}")
    line = summary_line(result)
    assert line.startswith(f"✗ the baseline observed:{missing} could not run") and \
        "choose one of them as --baseline" in line
    assert "do not agree" not in line


def test_explanation_tables_at_80_columns_keep_words_whole():
    """Tables that cannot fit without breaking a word are stacked as lines; the op, its types and the
    line of source stay whole."""
    from pathlib import Path

    from jaxparity.case import load_case

    case = load_case(f"{Path(__file__).parent / 'cases' / 'planted.py'}:make_fma")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"]).explain()
    text = render_text(result, width=80, verbose=True)
    assert max(len(line) for line in text.splitlines()) <= 80
    local = [line for line in text.splitlines() if line.startswith("#: ")]
    assert local, text
    flat = " ".join(text.split())  # rejoin wrapped lines: wrapping may only happen at spaces
    assert "float32[1000],float32[1000]->float32[1000]" in flat
    assert re.search(r"line: \S*planted\.py:\d+", flat)


# -- the words of an explanation: the fix of the cause that explains it, no sentinels ----------------
def _explanation(causes, fixes=(), summary="why"):
    from jaxparity.explain.explanation import PathExplanation

    return PathExplanation("tflite", "eager", summary, None, None, None, tuple(causes), tuple(fixes))


def _text(renderable, width=80):
    from rich.console import Console

    console = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_fix_of_a_cause_no_rerun_verified_is_printed_and_said_unverified():
    from jaxparity.explain.causes import CAUSES
    from jaxparity.explain.verdicts import CauseVerdict
    from jaxparity.report.explanation import render_explanation
    from jaxparity.report.html import _explanation as html_explanation

    conversion = next(c for c in CAUSES if c.id == "implementation-defined-conversion")
    library = next(c for c in CAUSES if c.id == "math-library")
    e = _explanation([CauseVerdict(conversion.id, conversion.title, "confirmed", "the inputs of #2 convert",
                                   "3 differing elements cast NaN", conversion.fix)])
    flat = " ".join(_text(render_explanation(e)).split())
    assert f"fix {conversion.fix} (not verified by a re-run)" in flat
    assert "advice-tflite-0" in html_explanation(e) and "jnp.nan_to_num(x)" in html_explanation(e)
    e = _explanation([CauseVerdict(library.id, library.title, "confirmed", "each side", "5 ULP", library.fix)])
    flat = " ".join(_text(render_explanation(e)).split())
    assert f"workaround {library.fix}" in flat and "not verified" not in flat  # nothing a re-run could verify


def test_the_specific_cause_explains_and_the_flag_rerun_is_its_proof():
    """log(exp(x)) rewritten to x: the identity rewrite (seen on the op's own values) is the cause; the
    algsimp re-run that restores parity proves it, and the fix shown is the identity rewrite's, not the
    algebraic simplifier's generic 'x * (1/c)'."""
    from pathlib import Path

    from jaxparity.case import load_case
    from jaxparity.explain.causes import CAUSES
    from jaxparity.report.format import explaining_cause

    case = load_case(f"{Path(__file__).parent / 'cases' / 'planted.py'}:make_identity_rewrite")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit"]).explain()
    (e,) = result.explanations
    assert explaining_cause(e.causes, e.localization.first).cause == "identity-rewrite"
    assert "Cause: identity rewrite" in e.summary and "✓ compile option jit:xla_disable_hlo_passes=algsimp" in e.summary
    identity = next(c for c in CAUSES if c.id == "identity-rewrite")
    cheaper = next(c for c in CAUSES if c.id == "algebraic-rewrite").fix
    (fix,) = [f for f in e.fixes if f.spec == "jit:xla_disable_hlo_passes=algsimp"]
    assert fix.verified and fix.description == identity.fix
    text = render_text(result, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(text.split())
    assert cheaper not in flat and "write the identity in the model" in flat


def test_nan_and_overflow_are_said_as_what_happened():
    from jaxparity.localize.elements import ElementEvidence, ElementExample

    nan, inf, sentinel = float("nan"), float("inf"), 2**63 - 1

    def said(path_ulp, base_ulp, example, exact=False):
        return ElementEvidence((), example, path_ulp, base_ulp, exact).describe("jit", "eager")

    dropped = said(sentinel, 0, ElementExample((0,), (None,), 9.0, nan, nan))
    assert "jit drops the NaN" in dropped and "overflow" not in dropped and str(sentinel) not in dropped
    assert "finite value where the declared op overflows to inf" in said(
        2**30, 0, ElementExample((0,), (100.0,), 3e38, inf, inf))
    from_inf = said(2**30, 0, ElementExample((0,), (inf,), 89.0, inf, inf))
    assert "infinite input" in from_inf and "overflows" not in from_inf
    assert "overflows" not in said(2**30, 0, ElementExample((0,), (0.0,), -104.0, -inf, -inf))
    near = said(5, 5, ElementExample((0,), (15.4,), 2475246.0, 2475248.5, 2475247.25))
    assert "far from it" not in near and "both are near it" in near  # 5 ULP each: not "both are far from it"
    assert "both are far from it" in said(2**21, 2**30, ElementExample((0,), (1e-39,), -87.0, -103.9, -87.3))
    ints = said(2147483647, 0, ElementExample((0,), (1,), 2147483647, 0, 0), exact=True)
    assert "off by 2147483647" in ints and "ULP" not in ints


def test_evidence_text_has_no_sentinel_none_or_plural_one():
    from jaxparity.report.format import readable

    text = readable("jit differs from eager in 2 elements (max 9223372036854775807 ULP); 'ftz' is None ULP away in "
                    "3 elements; 1 differing elements have NaN or inf inputs; differs in 1 elements")
    assert "9223372036854775807" not in text and "None" not in text and "1 elements" not in text
    assert "NaN against a number" in text and "1 differing element has" in text


def test_suggested_tolerances_are_finite_and_pass():
    from jaxparity.metrics import Tolerance, diff_leaf
    from jaxparity.report.format import required_tolerance
    from jaxparity.result import LeafResult

    def suggested(got, expected):
        d = diff_leaf(np.asarray(got), np.asarray(expected))
        return d, required_tolerance(LeafResult("out", d.dtype, d.shape, d, None, None, None))

    _, text = suggested(np.float32([89.0]), np.float32([np.inf]))
    assert "nan" not in text and "inf" not in text and text.startswith("--ulp")
    _, text = suggested(np.int32([2147483647, 0]), np.int32([0, 0]))
    assert text == "--atol 2147483647"
    got, expected = np.float32([1.0, 2.0029296875]), np.float32([1.0, 2.0])
    d, text = suggested(got, expected)
    atol = float(re.search(r"--atol (\S+)", text).group(1))
    rtol = float(re.search(r"--rtol (\S+)", text).group(1))
    assert diff_leaf(got, expected, Tolerance(atol=atol)).within_tolerance  # rounded up, not down
    assert diff_leaf(got, expected, Tolerance(rtol=rtol)).within_tolerance


def test_a_nan_against_a_number_shows_as_nan_and_long_specs_break_between_options():
    """Fast math folds x * 0 to 0 where x is NaN: every differing element is a NaN against a number (no
    'max ULP 0, max abs 0'); the 100-character spec breaks after its ':' and ',' at 80 columns."""
    from pathlib import Path

    from jaxparity.case import load_case
    from jaxparity.report.format import path_line

    case = load_case(f"{Path(__file__).parent / 'cases' / 'planted.py'}:make_nan_fold")
    spec = ("jit:xla_cpu_enable_fast_math=true,xla_cpu_fast_math_honor_nans=false,"
            "xla_cpu_fast_math_honor_infs=false")
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", spec])
    text = render_text(result, width=80)
    table = text.split("\n\n")[1]
    assert max(len(line) for line in table.splitlines()) <= 80
    rows = [[c.strip() for c in line.split("│")] for line in table.splitlines() if "│" in line]
    (jit,) = [r for r in rows if r[1] == "DIFFERS"]
    assert jit[2:4] == ["NaN", "NaN"]
    pieces = [r[0] for r in rows if r[0] and r[0] not in ("eager", "f64")]
    assert "".join(pieces) == spec and all(p.endswith((":", ",")) for p in pieces[:-1])
    line = path_line(result.path(spec), "eager")
    assert "3/5 elements differ, each a NaN against a number" in line and "up to 0 ULP" not in line


def test_tables_that_fit_break_only_between_words():
    """rich shares a too-narrow width by cutting the widest columns, breaking '(case.py:16)' into
    '(case.py:16' and ')'; fitted columns are at least as wide as their longest word."""
    from rich.table import Table
    from rich.text import Text

    from jaxparity.report.explanation import _Fit

    t = Table(title="causes, each tested", show_edge=False, pad_edge=False)
    for col in ("cause", "result", "experiment", "evidence"):
        t.add_column(col, overflow="fold")
    words = ["another math library (both sides within a few ULP of the correctly rounded result)", "confirmed",
             "each side against the correctly rounded sinh at #1 sinh (case_sinh_jit.py:16)",
             "tflite is 1 ULP and eager 5 ULP from the correctly rounded result on the same inputs"]
    t.add_row(*map(Text, words))
    for width in (80, 60, 40):
        text = _text(_Fit(t), width)
        assert max(len(line) for line in text.splitlines()) <= width
        cells = " ".join(text.replace("│", " ").replace("·", " ").split())
        for word in " ".join(words).split():
            assert word in cells.split(), (width, word, text)


def test_a_converter_diagnostic_glued_to_its_sentence_is_split():
    from jaxparity.paths.tflite import _converter_lines

    error = RuntimeError("Could not translate MLIR to FlatBuffer./tmp/m.py:13:15: error: 'vhlo.sort_v1' op is not "
                         "part of the vhlo support yet.\n<unknown>:0: error: failed while converting: 'main':")
    assert _converter_lines(error) == ["Could not translate MLIR to FlatBuffer.",
                                       "/tmp/m.py:13:15: error: 'vhlo.sort_v1' op is not part of the vhlo support yet.",
                                       "<unknown>:0: error: failed while converting: 'main':"]


def test_a_word_wider_than_the_column_breaks_and_is_never_cut():
    """A converter's error names a file by its whole path (TFLite: ".../flax/linen/attention.py:91:5: error:
    ..."): wider than the text column, it breaks across lines; nothing of it is cut off with an ellipsis."""
    import dataclasses

    import numpy as np

    import jaxparity
    from jaxparity.report.terminal import render_text

    r = jaxparity.compare(lambda x: x * 2, np.ones(3, np.float32), paths=["eager", "jit"])
    long = "/work/main/.venv/lib/python3.11/site-packages/flax/linen/attention.py:91:5: error: failed to legalize"
    r = dataclasses.replace(r, paths=tuple(dataclasses.replace(p, notes=p.notes + (long,)) if p.spec == "jit" else p
                                           for p in r.paths))
    text = render_text(r, width=80, verbose=True)
    assert "…" not in text
    assert "site-packages/flax/linen/attention.py:91:5:" in "".join(line.strip() for line in text.splitlines())


def test_a_reference_that_differs_is_never_shown_as_a_failure():
    """f64 (and declared) differ from eager wherever rounding does: they say where the numbers should be, so
    their row reads 'differs' in dim lowercase, never the red DIFFERS of a gated path."""
    import jax.numpy as jnp

    x = jnp.linspace(-3, 3, 16, dtype=jnp.float32)
    result = jaxparity.compare(lambda x: jnp.tanh(x) * jnp.exp(x), x, paths=["eager", "jit"])
    (row,) = [ln for ln in render_text(result, width=100).splitlines() if ln.startswith("f64 ") and "│" in ln]
    assert result.path("f64").verdict == "differs" and "DIFFERS" not in row and "differs" in row, row


def test_paths_with_the_same_numbers_bit_for_bit_are_said_once(examples):
    """The seed case: jit and export keep the bf16 convolution's result in f32 alike (XLA's excess precision)."""
    import dataclasses

    from jaxparity.case import load_case

    case = load_case(str(examples / "conv_bf16.py"))
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "export"])
    text = render_text(result, width=100, verbose=True)
    assert "export  differs from eager: ... (same numbers as jit)" in text, text
    unknown = dataclasses.replace(result, _source=None)  # without the runs, nothing is assumed the same
    assert "same numbers as" not in render_text(unknown, width=100, verbose=True)


def test_the_same_numbers_are_said_once_where_the_sentence_names_its_own_path():
    """A sentence that names its path ("jit's max ULP error") is the same finding for export with jit's values bit
    for bit: said once (Keras MobileNetV3's jit, export and savedmodel repeated 7 lines each)."""
    from pathlib import Path

    from jaxparity.case import load_case

    case = load_case(f"{Path(__file__).parent / 'cases' / 'loops.py'}:make_nn_scan_bf16")
    text = render_text(jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "export"]), width=100, verbose=True)
    assert "jit's max ULP error" in " ".join(text.split()), text
    assert "export  differs from eager: ... (same numbers as jit)" in text, text


def test_a_comparison_with_only_references_beside_the_baseline_says_nothing_was_compared():
    from jaxparity.report.format import summary_line

    result = jaxparity.compare(lambda x: x / 3.0, jnp.arange(3.0), paths=["eager", "f64"])
    line = summary_line(result)
    assert line.startswith("no path was compared with eager (f64: a reference, shown and never judged)"), line
    assert "agree" not in line


def test_paths_explained_as_one_that_differ_by_other_amounts_say_each_amount():
    """onnx, onnx-ref and iree explained alike (the same first op and causes): the triage's numbers are the
    first path's, so each one's own largest difference is said beside it."""
    from types import SimpleNamespace as NS

    from jaxparity.report.brief import group_sizes

    def path(spec, max_abs, max_ulp):
        return NS(spec=spec, leaves=[NS(diff=NS(max_abs=max_abs, max_ulp=max_ulp))])

    said = group_sizes([path("onnx", 9.54e-07, 64), path("onnx-ref", 7.15e-07, 48), path("iree", 1.91e-06, 128)],
                       "eager")
    assert said == ("each differs from eager by its own amount: onnx up to 9.54e-07 (64 ULP), onnx-ref up to "
                    "7.15e-07 (48 ULP), iree up to 1.91e-06 (128 ULP)")
    assert group_sizes([path("jit", 1e-3, 7168), path("export", 1e-3, 7168)], "eager") is None  # alike: nothing


def test_an_unknown_cause_says_which_experiment_could_not_run():
    """The algebraic-rewrite re-run crashes XLA (SIGSEGV with algsimp disabled, seen on an Equinox CNN): the cause
    stays unknown, and the short explanation says which experiment could not be tested and why."""
    from types import SimpleNamespace as NS

    from jaxparity.explain.verdicts import CauseVerdict
    from jaxparity.report.brief import brief

    crashed = CauseVerdict("algebraic-rewrite", "algebraic rewrite by the HLO simplifier (e.g. x / c -> x * (1/c))",
                           "not run", "re-ran jit:xla_disable_hlo_passes=algsimp",
                           "the re-run failed (crashed: re-running jit:xla_disable_hlo_passes=algsimp was killed by "
                           "SIGSEGV (its process died there; that re-run is skipped))")
    unknown = CauseVerdict("unknown", "unknown", "confirmed", "every applicable experiment above", "none restored it")
    e = NS(causes=(crashed, unknown), localization=None, fixes=(), notes=(), same_values=None, path="jit",
           baseline="eager", summary="", remainder=None)
    cause = dict(brief(e))["cause"]
    assert cause == ("not established: no known cause's experiment confirmed it (each is listed below); algebraic "
                     "rewrite by "
                     "the HLO simplifier could not be tested (crashed: re-running jit:xla_disable_hlo_passes=algsimp "
                     "was killed by SIGSEGV)")


def test_printed_reports_carry_no_trailing_spaces():
    import io

    from rich.console import Console
    from rich.table import Table

    from jaxparity.report.terminal import TrimmedLines

    out = io.StringIO()
    stream = TrimmedLines(out)
    for chunk in ("a  ", " b   \n", "  \n", "c  ", "  d\n"):  # spaces held across writes, dropped at a line's end
        stream.write(chunk)
    assert out.getvalue() == "a   b\n\nc    d\n"
    grid = Table.grid(padding=(0, 1))
    grid.add_column()
    grid.add_column()
    grid.add_row("where", "a long line that wraps in the second column of the grid, as a report does")
    grid.add_row("who", "short")
    plain, trimmed = io.StringIO(), io.StringIO()
    Console(file=plain, width=40).print(grid)
    Console(file=TrimmedLines(trimmed), width=40).print(grid)
    assert any(line.endswith(" ") for line in plain.getvalue().splitlines())  # rich pads the cells
    assert trimmed.getvalue() == "\n".join(line.rstrip() for line in plain.getvalue().splitlines()) + "\n"
