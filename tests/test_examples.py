"""Every path on every example. Relations that hold on any CPU: every path runs; export and the
served SavedModel execute the very program jit compiles, so they agree with jit bit for bit."""

import numpy as np
import pytest

import jaxparity
from jaxparity.case import load_case

pytestmark = pytest.mark.slow

EXAMPLES = ["conv_bf16.py", "conv_bf16.py:make_report_input", "mlp_bf16.py", "cnn_bf16.py", "transformer_bf16.py"]


def _eqn_count(jaxpr) -> int:
    from jax.extend.core import ClosedJaxpr, Jaxpr

    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for p in eqn.params.values():
            for sub in p if isinstance(p, (tuple, list)) else [p]:
                if isinstance(sub, ClosedJaxpr):
                    n += _eqn_count(sub.jaxpr)
                elif isinstance(sub, Jaxpr):
                    n += _eqn_count(sub)
    return n


@pytest.mark.parametrize("spec", EXAMPLES)
def test_every_path_runs_on_every_example(examples, spec):
    case = load_case(str(examples / spec))
    result = jaxparity.compare(case.fn, *case.args)  # all default paths
    for p in result.paths:
        assert p.status == "ok", f"{p.spec}: {p.message}"
        for leaf in p.leaves:
            assert leaf.error_vs_f64 is not None and np.isfinite(leaf.error_vs_f64.max_abs), p.spec
    jit = {lf.name: lf for lf in result.path("jit").leaves}
    for spec_ in ("export", "savedmodel"):
        for leaf in result.path(spec_).leaves:
            # same verdict against eager and the same distance: the same numbers as jit
            assert leaf.diff.max_ulp == jit[leaf.name].diff.max_ulp, spec_
            assert leaf.diff.n_differ == jit[leaf.name].diff.n_differ, spec_


def test_transformer_example_is_large_enough(examples):
    import jax

    case = load_case(str(examples / "transformer_bf16.py"))
    assert _eqn_count(jax.make_jaxpr(case.fn)(*case.args).jaxpr) >= 100


@pytest.mark.parametrize("spec", ["conv_bf16.py", "transformer_bf16.py"])
def test_every_experiment_runs_when_explaining_an_example(examples, spec):
    """Explaining jit and the served SavedModel runs every experiment: localization (through the
    serving process too), compiler evidence and the fingerprint, none failing on these models."""
    case = load_case(str(examples / spec))
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "jit", "savedmodel"]).explain()
    assert {e.path for e in result.explanations} == {"jit", "savedmodel"}
    for e in result.explanations:
        assert e.localization is not None and e.localization.local, e.path
        assert e.fingerprint is not None, (e.path, e.notes)
        failed = [n for n in e.notes if n.startswith(("no compiler evidence", "no fingerprint", "no IREE"))]
        assert failed == [], (e.path, failed)
