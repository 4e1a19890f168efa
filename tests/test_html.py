"""The HTML report: self-contained, escaped, with the right numbers; and rendered by a real browser.

The browser test needs headless Chromium at /usr/bin/chromium (apt-get install -y chromium) and the
Python package playwright (pip install playwright==1.65.2). It fails, not skips, without them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from jaxparity.report.html import render_html_report, write_html

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def seed(seed_explained):
    return seed_explained


@pytest.fixture(scope="module")
def two_explained(seed):
    """The seed result with a second explanation (renamed, its drift doubled), so the drift chart has two lines."""
    e = seed.explanations[0]
    loc = e.localization
    doubled = tuple(dataclasses.replace(d, max_abs=2 * d.max_abs) for d in loc.drift)
    other = dataclasses.replace(e, path="jit:other", localization=dataclasses.replace(loc, drift=doubled))
    return dataclasses.replace(seed, explanations=(e, other))


def _section(html: str, sid: str) -> str:
    m = re.search(rf'<(section|div|header)[^>]*id="{re.escape(sid)}"[^>]*>(.*?)</\1>', html, re.S)
    assert m, f"no element with id={sid!r}"
    return m.group(2)


# -- structure ------------------------------------------------------------------------------------
def test_user_strings_are_escaped(seed):
    e = dataclasses.replace(seed.explanations[0], path="<b>p</b>", summary="<img src=x onerror=alert(1)>")
    hostile = dataclasses.replace(seed, case="<script>alert('x')</script>", explanations=(e,))
    html = render_html_report(hostile)
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>p</b>" not in html and "&lt;b&gt;p&lt;/b&gt;" in html


def test_self_contained_no_network_references(seed):
    html = render_html_report(seed)
    assert "http://" not in html and "https://" not in html
    assert not re.search(r'\b(src|href)\s*=', html, re.I), "no src=/href= at all: nothing is loaded"
    assert "<script" not in html and "@import" not in html and "url(" not in html
    assert html.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in html


def test_summary_matrix_has_the_seed_numbers(seed):
    html = render_html_report(seed)
    summary = _section(html, "summary")
    row = re.search(r'<tr id="row-jit">(.*?)</tr>', summary, re.S).group(1)
    assert 'class="verdict-differs"' in row
    # jit's distance from eager is whatever this CPU's XLA skipped (7168 ULP where the report was made)
    from jaxparity.report.format import ulp_text

    ulp = seed.path("jit").worst.diff.max_ulp
    assert ulp > 0 and f'data-max-ulp="{ulp}"' in row and f"{ulp_text(ulp)} ULP" in row
    declared = re.search(r'<tr id="row-declared">(.*?)</tr>', summary, re.S).group(1)
    assert "verdict-identical" in declared
    assert "✗ jit diverges from eager — excess precision at examples/conv_bf16.py:30" in _section(html, "header")


def test_sections_present(seed):
    html = render_html_report(seed)
    for sid in ("header", "howto", "summary", "findings", "drift", "histograms", "explain-jit", "local-jit",
                "hlo-jit", "fingerprint-jit", "causes-jit", "fix-jit-0", "values"):
        assert f'id="{sid}"' in html, sid
    # the explanation's evidence: the user's source line, the HLO line that lost a convert, a verified fix
    assert "examples/conv_bf16.py:30" in html
    assert "float-normalization-bf16" in html and "conv_general_dilated" in html
    assert "✓ verified" in html and seed.explanations[0].fingerprint.best in html  # skip-widened on x86 CPUs
    assert "0.23010519" in html  # the values of the tiny output


def test_drift_has_one_polyline_per_explained_path(seed, two_explained):
    assert len(re.findall(r'<polyline class="drift-line"', render_html_report(seed))) == 1
    html = render_html_report(two_explained)
    lines = re.findall(r'<polyline class="drift-line" data-path="([^"]*)"', html)
    assert lines == ["jit", "jit:other"]
    assert html.count('class="local-mark"') == 2 * len(seed.explanations[0].localization.local)


def test_identical_curves_share_one_line(seed):
    e = seed.explanations[0]
    same = dataclasses.replace(seed, explanations=(e, dataclasses.replace(e, path="export")))
    html = render_html_report(same)
    assert re.findall(r'<polyline class="drift-line" data-path="([^"]*)"', html) == ["jit = export"]
    assert "(identical curves)" in _section(html, "drift")


def test_drift_leaves_out_ops_no_difference_reaches(seed):
    """After the first difference, an op fed only by unchanged values (a parameter's cast) is not drawn."""
    from jaxparity.localize.localizer import OpDrift
    from jaxparity.report.html import _plotted

    loc = seed.explanations[0].localization
    n = len(loc.program)
    first = min(d.index for d in loc.drift if d.max_abs)
    cast = dataclasses.replace(loc.program[0], index=n, operands=("arg0",))  # fed by a parameter only
    fed = dataclasses.replace(loc.program[-1], index=n + 1, operands=(f"op{n - 1}",))  # fed by the output
    loc2 = dataclasses.replace(loc, program=loc.program + (cast, fed),
                               drift=loc.drift + (OpDrift(n, "", 0.0, 0.0, 0), OpDrift(n + 1, "", 0.0, 0.0, 0)))
    plotted = [d.index for d in _plotted(loc2)]
    assert n not in plotted and n + 1 in plotted  # zero there, but a difference reached it: drawn
    assert [i for i in plotted if i < first] == list(range(first))


def test_histogram_bars_match_counts(seed):
    html = render_html_report(seed)
    hist = _section(html, "histograms")
    jit = seed.path("jit").leaves[0].diff.ulp_histogram
    for bucket, count in jit:
        assert f"<title>{bucket} ULP: {count} elements</title>" in hist


def test_write_html(tmp_path, seed):
    out = tmp_path / "r.html"
    write_html(seed, out)
    assert out.read_text(encoding="utf-8") == render_html_report(seed)


# -- a real browser -------------------------------------------------------------------------------
def _browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # fail, do not skip: the lead installs this for `make test`
        pytest.fail(f"the browser test needs playwright: `.venv/bin/pip install playwright==1.65.2` ({exc})")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"the browser test needs Chromium at {CHROMIUM}: `apt-get install -y chromium`")
    return sync_playwright


def test_report_renders_in_headless_chromium(two_explained, seed):
    sync_playwright = _browser()
    ARTIFACTS.mkdir(exist_ok=True)
    page_file = ARTIFACTS / "report.html"
    write_html(two_explained, page_file)
    shot = ARTIFACTS / "report.png"
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
            page.on("requestfailed", lambda req: problems.append(f"request failed: {req.url}"))
            requests: list[str] = []
            page.on("request", lambda req: requests.append(req.url))
            page.goto(page_file.as_uri(), wait_until="load")
            for sid in ("header", "summary", "drift", "histograms", "explain-jit", "fix-jit-0", "values"):
                assert page.locator(f"#{sid}").is_visible(), sid
            assert "7168 ULP" in page.inner_text("#row-jit")
            assert "identical" in page.inner_text("#row-declared")
            assert page.locator("#drift polyline.drift-line").count() == 2
            box = page.locator("#drift-svg").bounding_box()
            assert box is not None and box["width"] > 600 and box["height"] > 150
            assert "✓ verified" in page.inner_text("#fix-jit-0")
            assert "carries 100% of the output difference" in page.inner_text("#explain-jit")
            # nothing beyond the file itself was requested
            assert [u for u in requests if not u.startswith("file://")] == []
            # no horizontal overflow of the page at a laptop width
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"page is {overflow}px wider than the viewport"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert problems == [], problems
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_many_inputs_are_counted_not_listed():
    from jaxparity.report.format import arrays_line
    from jaxparity.result import ArrayInfo

    params = [ArrayInfo(f"arg0/params/Dense_{i}/kernel", "float32", (4, 4)) for i in range(8)]
    x = ArrayInfo("arg1", "bfloat16", (2, 4))
    assert arrays_line([params[0], x]) == "arg0/params/Dense_0/kernel float32[4,4], arg1 bfloat16[2,4]"
    assert arrays_line(params + [x]) == "arg0/params/… 8 arrays (128 float32 values), arg1 bfloat16[2,4]"


def test_ulp_counts_in_the_millions_are_short():
    from jaxparity.report.format import ulp_text

    assert [ulp_text(n) for n in (0, 30300, (1 << 20) - 1, 1939406848)] == ["0", "30300", "1048575", "1.9e9"]
