"""Outputs defined only up to sign, phase or order: compared as the math defines them, and a real
difference is never aligned away."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jaxparity
from jaxparity.comparison import build_result
from jaxparity.equivalence.producers import output_rules
from jaxparity.execution.runs import CaseInfo, PathRun
from jaxparity.metrics import Tolerance

RNG = np.random.RandomState(0)
SYM = (lambda a: (a + a.T).astype(np.float32))(RNG.randn(4, 4))


def _eager(fn, args) -> PathRun:
    return jaxparity.compare(fn, *args, paths=["eager"])._source["runs"]["eager"]


def _outputs(fn, args) -> list[np.ndarray]:
    return [a for _, a in _eager(fn, args).outputs]


def _judge(fn, args, got_outputs):
    """build_result of eager (the function as JAX runs it) against fabricated jit outputs."""
    base = _eager(fn, args)
    names = [n for n, _ in base.outputs]
    runs = {"eager": base, "jit": PathRun("jit", "ok", tuple(zip(names, got_outputs)),
                                          output_rules=output_rules(fn, args))}
    info = CaseInfo("case", None, "test", ())
    return build_result(info, runs, "eager", Tolerance(), {"eager", "jit"}).path("jit")


def test_eigh_sign_flips_and_value_order_are_equal_but_a_changed_element_differs():
    fn = jnp.linalg.eigh
    w, v = _outputs(fn, (SYM,))
    flipped = v * np.array([1, -1, 1, -1], np.float32)
    order = [3, 1, 0, 2]  # another runtime may return the eigenpairs in another order
    p = _judge(fn, (SYM,), [w[order], flipped[:, order]])
    assert p.verdict == "equal", p
    assert all("sorted set" in lf.rule or "sign/phase" in lf.rule for lf in p.leaves)
    assert not any(lf.diff.bitwise_equal for lf in p.leaves)
    wrong = flipped.copy()
    wrong[2, 1] = np.nextafter(wrong[2, 1], np.float32(9))  # one ULP in one element
    p = _judge(fn, (SYM,), [w, wrong])
    vec = [lf for lf in p.leaves if lf.name.endswith("eigenvectors")][0]
    assert p.verdict == "differs" and vec.diff.n_differ == 1 and vec.diff.max_ulp == 1


def test_complex_eigenvectors_up_to_phase():
    a = (RNG.randn(3, 3) + 1j * RNG.randn(3, 3)).astype(np.complex64)
    fn = lambda x: lax.linalg.eig(x, compute_left_eigenvectors=False)  # noqa: E731
    w, vr = _outputs(fn, (a,))
    phase = np.exp(1j * np.array([0.0, 0.5, 2.0]))
    turned = (vr.astype(np.complex128) * phase).astype(np.complex64)
    p = _judge(fn, (a,), [w[::-1], turned[:, ::-1]])
    vec = p.leaves[1]
    # Turning a unit complex vector rounds (twice: here and in the rule): a few float32 epsilons of
    # its norm, 1. (ULP counts are meaningless for the components LAPACK made exactly 0.)
    assert p.leaves[0].diff.n_differ == 0 and vec.diff.max_abs <= 4 * 2.0**-24, vec.diff
    assert "sign/phase" in vec.rule and "order of their values" in vec.rule


def test_qr_diagonal_of_signs():
    a = RNG.randn(4, 3).astype(np.float32)
    fn = jnp.linalg.qr
    q, r = _outputs(fn, (a,))
    d = np.array([-1, 1, -1], np.float32)
    p = _judge(fn, (a,), [q * d, d[:, None] * r])
    assert p.verdict == "equal" and "diagonal of signs" in p.leaves[0].rule
    p = _judge(fn, (a,), [q * d, r])  # R not turned with Q: a real inconsistency, not hidden
    assert p.verdict == "differs"


def test_unstable_sort_ties_compared_as_sets_stable_sort_not():
    keys = np.array([3, 1, 3, 2, 1], np.int32)
    vals = np.array([10, 20, 30, 40, 50], np.int32)
    unstable = lambda k, v: lax.sort((k, v), is_stable=False, num_keys=1)  # noqa: E731
    k, v = _outputs(unstable, (keys, vals))
    swapped = v.copy()
    swapped[[0, 1]] = swapped[[1, 0]]  # the two values of key 1 the other way round
    p = _judge(unstable, (keys, vals), [k, swapped])
    assert p.verdict == "equal" and "equal sort keys" in p.leaves[1].rule
    stable = lambda k, v: lax.sort((k, v), is_stable=True, num_keys=1)  # noqa: E731
    p = _judge(stable, (keys, vals), [k, swapped])
    assert p.verdict == "differs" and p.leaves[1].rule is None  # a stable sort's order is defined
    other = v.copy()
    other[0] = 99  # a value that is not there at all
    p = _judge(unstable, (keys, vals), [k, other])
    assert p.verdict == "differs"


def test_eigh_through_every_reference_path_uses_the_rule():
    r = jaxparity.compare(jnp.linalg.eigh, SYM, paths=["eager", "jit", "declared", "f64"])
    for spec in ("declared", "f64"):
        p = r.path(spec)
        assert {lf.rule is not None for lf in p.leaves} == {True}
        # float64 LAPACK rounded to float32 against float32 LAPACK: close, whatever the signs
        assert max(lf.diff.max_abs for lf in p.leaves) < 1e-5 * np.abs(SYM).sum()


def test_rules_only_for_direct_outputs():
    assert output_rules(lambda a: jnp.linalg.eigh(a)[1] * 2, (SYM,)) == {}
    assert set(output_rules(jax.jit(jnp.linalg.svd), (SYM,))) == {"out/U", "out/S", "out/Vh"}


@pytest.mark.parametrize("fn", [jnp.linalg.eigh, jnp.linalg.svd, jnp.linalg.qr])
def test_json_names_the_rule(fn):
    r = jaxparity.compare(fn, SYM, paths=["eager", "declared"])
    leaves = r.to_dict()["paths"][1]["leaves"]
    assert all(isinstance(lf["rule"], str) for lf in leaves)


def test_empty_decompositions():
    for fn in (jnp.linalg.eigh, jnp.linalg.svd, jnp.linalg.qr, lambda a: lax.linalg.eig(a)):
        r = jaxparity.compare(fn, np.zeros((0, 0), np.float32), paths=["eager", "declared"])
        assert r.path("declared").status == "ok" and r.passed


def test_a_phase_within_rounding_of_one_is_not_applied():
    # Q off by one ULP in one element: its columns' phases are 1 to within rounding, so R (identical as
    # computed) must not be turned by them (turning a complex row rounds: a difference we would invent).
    a = (RNG.randn(3, 3) + 1j * RNG.randn(3, 3)).astype(np.complex64)
    q, r = _outputs(jnp.linalg.qr, (a,))
    nudged = q.copy()
    nudged[1, 1] = complex(np.nextafter(q[1, 1].real, np.float32(9)), q[1, 1].imag)
    p = _judge(jnp.linalg.qr, (a,), [nudged, r])
    assert p.leaves[0].diff.n_differ == 1 and p.leaves[1].diff.n_differ == 0
