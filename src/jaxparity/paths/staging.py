"""One trace of the case, shared by the paths that compile it in this process; and, within
``compile_once()``, what depends only on the program made once for every input set.

``jit``, ``export`` and ``savedmodel`` (and ``onnx``'s converter) all start from the case's function on
the flat leaves of its arguments. Each used to build its own flat wrapper and trace it (and trace once
more, with ``eval_shape``, for the output's structure). ``staged(fn, args)`` gives them one wrapper per
(function, argument structure) and one ``jax.jit`` of it, so JAX's own caches do the sharing: the
function is traced once per argument shapes and JAX configuration, ``export`` and jax2tf's native
serialization lower that trace once between them (the same jitted function, the same shapes and
platforms), and ``jit`` compiles the same trace. ``jit``'s lowering is its own: ``jax.export`` lowers
for serialization (another calling convention), which is the program a serving process runs, not the
one ``jax.jit`` runs.

``compile_once()`` (many-inputs mode, a sweep worker) goes further: executables, export artifacts, the
flat program, the instrumented program and compiler evidence are reused across input sets (``reused``).
Every such key holds JAX's own trace context (``config_key``) besides the function and the shapes, as
JAX's caches do: an experiment under another configuration is never given the first one's result.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["Staged", "compile_once", "config_key", "keys_as_data", "reused", "reusing", "signature", "staged"]

T = TypeVar("T")
_REUSING = [False]


@contextmanager
def compile_once() -> Iterator[None]:
    """Within: what depends only on the program (a compiled executable, an export artifact, the flat
    program, compiler evidence) is made once per function, argument shapes and JAX configuration and
    reused for every input set (many-inputs mode, a sweep worker); and jit and export return without
    waiting for the result: the caller copies it to the host. Outside, everything is made afresh."""
    before = _REUSING[0]
    _REUSING[0] = True
    try:
        yield
    finally:
        _REUSING[0] = before  # entries stay for the next chunk of samples, unused outside


def reusing() -> bool:
    return _REUSING[0]


def config_key() -> Any:
    """JAX's own trace context: every configuration option that changes what a trace gives (matmul
    precision, x64, the PRNG implementation...), the key JAX's caches use; None where this JAX does
    not expose it, and then nothing is reused. An experiment that re-runs the same function on the
    same shapes under another configuration must never get the first one's executable."""
    from ..jaxcompat import trace_context

    return trace_context()


_MEMO: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()


def reused(kind: str, key: tuple, holds: Any, make: Callable[[], T]) -> T:
    """``make()``, made once per ``(kind, key, JAX configuration)`` while ``compile_once`` is active.
    ``holds``: what ``key`` names by ``id``, kept with the entry so that the id cannot be reused."""
    config = config_key() if _REUSING[0] else None
    if config is None:
        return make()
    full = (kind, key, config)
    hit = _MEMO.get(full)
    if hit is not None and hit[0] is holds:
        _MEMO.move_to_end(full)
        return hit[1]
    value = make()
    _MEMO[full] = (holds, value)
    while len(_MEMO) > 64:
        _MEMO.popitem(last=False)
    return value


class Staged:
    """``fn`` as a function of the flat leaves of arguments with tree ``in_tree``, and its ``jax.jit``."""

    def __init__(self, fn: Callable[..., Any], in_tree: Any) -> None:
        import jax

        self.fn = fn  # held: its id keys the cache, and must not be reused while this lives
        self.in_tree = in_tree
        self._out_trees: dict[tuple, Any] = {}
        self._program_keys: dict[tuple, str] = {}

        def flat(*xs: Any) -> list[Any]:
            out_leaves, out_tree = jax.tree_util.tree_flatten(fn(*jax.tree_util.tree_unflatten(in_tree, xs)))
            self._out_trees[_avals(xs)] = out_tree  # recorded as it traces (or runs), per argument shapes
            return out_leaves

        flat.__name__ = getattr(fn, "__name__", "fn")
        self.flat = flat
        self.jitted = jax.jit(flat)

    def program_key(self, leaves: Sequence[Any]) -> str:
        """A digest of the program these leaves make of ``fn``: the StableHLO ``jax.jit`` lowers, with
        its source locations and name scopes (so that two models with the same ops in other places or
        other modules differ, as a converter that reads flax modules may), every leaf's type (an unused
        one too: a signature holds it) and JAX's trace context. Constants the function closes over are
        in the text; weights passed as arguments are inputs of every artifact and not in it."""
        from ..cache import fingerprint
        from ..jaxcompat import program_text

        key = (_avals(leaves), config_key())
        if key not in self._program_keys:
            text = program_text(self.jitted.lower(*leaves))
            self._program_keys[key] = fingerprint(text, [(str(s), str(d), w) for s, d, w in key[0]], repr(key[1]))
        return self._program_keys[key]

    def out_tree(self, leaves: Sequence[Any]) -> Any:
        """The output's tree structure for these argument leaves (traced once if no path has yet)."""
        import jax

        key = _avals(leaves)
        if key not in self._out_trees:
            jax.eval_shape(self.jitted, *leaves)  # JAX's trace cache: free once a path has traced it
            if key not in self._out_trees:  # traced before under another config: trace the plain function
                jax.eval_shape(self.flat, *leaves)
        return self._out_trees[key]


def signature(args: tuple) -> tuple:
    """The structure of ``args`` and what JAX traces each leaf as: what a trace depends on besides
    the function and the configuration."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    return tree, _avals(leaves)


def _avals(leaves: Sequence[Any]) -> tuple:
    """What JAX traces these leaves as (shape, dtype, weak type), for values and tracers alike."""
    from ..jaxcompat import typeof

    return tuple((a.shape, a.dtype, a.weak_type) for a in map(typeof, leaves))


_STAGED: OrderedDict[tuple[int, Any], Staged] = OrderedDict()


def staged(fn: Callable[..., Any], args: tuple) -> tuple[Staged, list[Any]]:
    """The shared ``Staged`` of ``fn`` for the structure of ``args``, and the leaves of ``args``."""
    import jax

    leaves, in_tree = jax.tree_util.tree_flatten(args)
    key = (id(fn), in_tree)
    hit = _STAGED.get(key)
    if hit is None or hit.fn is not fn:
        hit = _STAGED[key] = Staged(fn, in_tree)
    _STAGED.move_to_end(key)
    while len(_STAGED) > 8:
        _STAGED.popitem(last=False)
    return hit, leaves


def keys_as_data(flat: Callable[..., Any], leaves: Sequence[Any]) -> tuple[Callable[..., Any], list[Any], list[Any]]:
    """``flat`` taking each typed PRNG key of ``leaves`` as its key data (uint32) and wrapping it again
    inside, the leaves with those keys as data, and each leaf's key implementation (None: not a key).

    A converter's graph takes tensors (a SavedModel signature, an ONNX graph input): an NNX module's
    ``Rngs`` or a key argument then crosses as the numbers it holds, and the program inside computes
    with the very key JAX's does. The feeds match: ``pytree.host`` hands a key over as its key data."""
    import jax

    impls = [jax.random.key_impl(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else None for x in leaves]
    if not any(impl is not None for impl in impls):
        return flat, list(leaves), impls

    def keyed(*xs: Any) -> Any:
        return flat(*(jax.random.wrap_key_data(x, impl=i) if i is not None else x for x, i in zip(xs, impls)))

    keyed.__name__ = getattr(flat, "__name__", "fn")
    return keyed, [jax.random.key_data(x) if i is not None else x for x, i in zip(leaves, impls)], impls
