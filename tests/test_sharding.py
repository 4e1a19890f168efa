"""Sharded paths (issue 13): `jit:mesh=N` and `export:mesh=N` run the case over N CPU devices (the
command line starts JAX with N host devices); explain names the collective whose partial sums differ
and judges the difference against the reduction's error bound."""

import json
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from jaxparity.paths import PathUnavailable, make_path
from planted_lines import planted_line

CASE = Path(__file__).parent / "cases" / "sharded.py"


def test_a_mesh_larger_than_the_process_has_says_how_to_get_it():
    if jax.device_count() >= 8:
        pytest.skip("this process was started with 8 devices")
    with pytest.raises(PathUnavailable, match="xla_force_host_platform_device_count=8"):
        make_path("jit:mesh=8").run(lambda x: x, (jax.numpy.ones(8),))


@pytest.mark.slow
def test_sharded_batch_mean_is_an_all_reduce_within_its_bound(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "jaxparity", "explain", str(CASE), "--paths",
                           "jit,jit:mesh=8,export:mesh=8", "--baseline", "jit", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    # every difference is a sum within its error bound: rounding noise, which the default gate passes; that the
    # two paths differ only in mesh=8 says where, not how, so it is neither the cause said nor a reason to fail
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "within rounding noise" in proc.stdout and "an option of the path" not in proc.stdout, proc.stdout
    result = json.loads(out.read_text())
    by_path = {p["spec"]: p for p in result["paths"]}
    assert by_path["jit:mesh=8"]["status"] == "ok" and by_path["export:mesh=8"]["status"] == "ok"
    e = next(x for x in result["explanations"] if x["path"] == "jit:mesh=8")
    assert e["rounding"] is not None
    # The batch mean is summed per device, then all-reduced. (The Dense layer's matmul may differ too:
    # a shard of 8 rows is another matmul shape, blocked otherwise; its contraction is not split.)
    local = e["localization"]["local"]
    mean = next(d for d in local if d["op"]["primitive"] == "reduce_sum")
    assert mean["op"]["user_source"].endswith(planted_line(CASE, "batch mean"))
    part = next(c for c in e["causes"] if c["cause"] == "partitioned-reduction")
    assert part["status"] in ("confirmed", "noise")
    evidence = part["evidence"]
    assert f"reduce_sum ({planted_line(CASE, 'batch mean')})" in evidence.replace("tests/cases/", "")
    assert "8 partial sums" in evidence and "all-reduce" in evidence and "within the error bound" in evidence
