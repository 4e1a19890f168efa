"""JAX's own primitive test corpus (jax._src.internal_test_util.test_harnesses) through the
interpreter: one harness per (group, kind of dtype) of the groups whose results are selections,
integers or random draws, where declared must be eager bit for bit, plus the groups that
carry sub-jaxprs (which must evaluate in both modes)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxparity.interpreter import interpret

th = pytest.importorskip("jax._src.internal_test_util.test_harnesses")

EXACT_GROUPS = frozenset({
    "min", "max", "clamp", "sort", "argmin", "argmax", "cummax", "cummin", "top_k",
    "reduce_window_max", "reduce_window_min", "scatter_max", "scatter_min", "select_and_gather_add",
    "random_gamma", "random_categorical", "random_uniform", "random_randint", "random_split",
    "rng_bit_generator", "iota_2x32_shape"})
SUB_JAXPR_GROUPS = frozenset({"custom_linear_solve", "reduce", "reduce_window_add", "scatter_add",
                              "scatter_mul"})


def _sample() -> dict[str, object]:
    seen, picked = set(), {}
    for h in th.all_harnesses:
        key = (h.group_name, np.dtype(h.dtype).kind if h.dtype is not None else None)
        if (h.group_name in EXACT_GROUPS | SUB_JAXPR_GROUPS and key not in seen
                and h.filter("cpu", include_jax_unimpl=False)):
            seen.add(key)
            picked[h.fullname] = h
    return picked


HARNESSES = _sample()


def _numpy(x) -> np.ndarray:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(x))
    return np.asarray(x)


def _bits(x) -> tuple[np.ndarray, np.ndarray]:
    """The bit patterns of `x` (complex: of both components) with NaNs zeroed, and the NaNs."""
    x = _numpy(x)
    if x.dtype.kind == "c":
        x = np.stack([x.real, x.imag])
    nan = np.isnan(x.astype(np.float64)) if x.dtype.kind in "fV" else np.zeros(x.shape, bool)
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
    return np.where(nan, 0, x.view(view)), nan


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_corpus_harness(name):
    """Both modes evaluate with eager's shapes; for the exact groups declared is eager."""
    h = HARNESSES[name]
    args = h.dyn_args_maker(np.random.RandomState(0))
    with jax.disable_jit():
        want = jax.tree_util.tree_leaves(h.dyn_fun(*args))
    got = {mode: jax.tree_util.tree_leaves(interpret(h.dyn_fun, *args, mode=mode))
           for mode in ("declared", "f64")}
    for mode, leaves in got.items():
        assert [np.shape(g) for g in leaves] == [np.shape(w) for w in want], mode
    if h.group_name in EXACT_GROUPS:
        for g, w in zip(got["declared"], want, strict=True):
            assert _numpy(g).dtype == _numpy(w).dtype
            (gb, gn), (wb, wn) = _bits(g), _bits(w)
            np.testing.assert_array_equal(gn, wn)
            np.testing.assert_array_equal(gb, wb)
