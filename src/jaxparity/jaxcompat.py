"""Every private JAX symbol and version-dependent jaxpr parameter jaxparity reads, in one place.

jaxparity runs in the user's environment, with the user's JAX: from 0.4.38 to 0.12 (``versions.SUPPORTED``).
Anything not in JAX's public API, and any jaxpr parameter whose name or layout changed between those
versions, is read through this module; each entry says which versions each branch covers (checked with
``jax.make_jaxpr`` on jax 0.4.38 / Python 3.10, 0.9.2 / 3.11 and 0.12.0.1 / 3.13, and by the smoke suite of
tests/version_smoke.py on 0.5.3, 0.6.2, 0.7.2, 0.8.3, 0.10.2 and 0.11.2 / 3.12). The rest of the
package imports JAX's public API only (``jax``, ``jax.lax``, ``jax.extend``, ``jax.export``,
``jax.experimental.jax2tf``): tests/test_layers.py checks that no other module names ``jax._src``.

Jaxpr facts that hold on every supported version (no branch needed):
  * jax.jit is primitive "jit" (before 0.7: "pjit"), param ``jaxpr`` (ClosedJaxpr); jax.checkpoint is
    "remat2" (printed "checkpoint") with an open ``jaxpr``; custom_jvp/custom_vjp are "custom_jvp_call"/
    "custom_vjp_call" (0.4.38: "custom_vjp_call_jaxpr", ``fun_jaxpr``) carrying a ClosedJaxpr that takes
    all the eqn's operands; lax.composite is "composite" (``jaxpr``); "custom_dce_call" has ``fun_jaxpr``.
  * "cond": ``branches`` (ClosedJaxprs), operand 0 the branch index. "while": ``cond_jaxpr``,
    ``body_jaxpr``, ``cond_nconsts``, ``body_nconsts``, operands cond consts + body consts + carry.
  * "custom_linear_solve": ``jaxprs`` and ``const_lengths`` NamedTuples (matvec, vecmat, solve,
    transpose_solve); operands: those consts in order, then b.
  * Combiner jaxprs typed at the declared dtype: scatter-* ``update_jaxpr`` + ``update_consts``,
    "reduce" ``jaxpr``, "reduce_window" ``jaxpr`` + ``consts``.
  * Jaxpr/ClosedJaxpr hash by identity; ``jax.extend.core`` exports Literal, Jaxpr, ClosedJaxpr,
    JaxprEqn and primitives, but not DropVar or Tracer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax

from .versions import parse as _parse

__all__ = ["CALL_PARAM", "COMBINER_PARAMS", "DropVar", "JAX_VERSION", "Tracer", "bind", "cache_compression",
           "current_name_stack", "dce_jaxpr", "enable_x64", "export_target", "hlo_with_metadata", "lax_test_util",
           "no_persistent_cache", "one_compile_per_program", "program_text", "public_test_util", "scan_layout",
           "stablehlo_versions", "summarize", "test_harnesses", "trace_context", "typeof", "user_context",
           "user_frames"]

JAX_VERSION = _parse(jax.__version__)


# --- private symbols -------------------------------------------------------------------------------
# jax._src.core.DropVar and Tracer: the same names on every supported version (not in jax.extend.core).
from jax._src.core import DropVar, Tracer  # noqa: E402

# jax._src.source_info_util: summarize, current_name_stack and user_context(traceback, name_stack=...)
# on every supported version. user_frames takes the SourceInfo before 0.7 and its traceback from 0.7.
from jax._src import source_info_util as _source_info  # noqa: E402

summarize = _source_info.summarize
current_name_stack = _source_info.current_name_stack
user_context = _source_info.user_context

_FRAMES_OF_TRACEBACK = JAX_VERSION >= (0, 7)


def user_frames(source_info: Any) -> list[Any]:
    """The user's frames of an equation's ``source_info``, innermost first (none where it has no traceback)."""
    if source_info is None or getattr(source_info, "traceback", None) is None:
        return []
    if _FRAMES_OF_TRACEBACK:
        return list(_source_info.user_frames(source_info.traceback))
    return list(_source_info.user_frames(source_info))


def typeof(x: Any) -> Any:
    """The abstract value JAX traces ``x`` as: jax.typeof from 0.4.37 on; jax.core.get_aval before."""
    if hasattr(jax, "typeof"):
        return jax.typeof(x)
    return jax.core.get_aval(x)  # pragma: no cover - before 0.4.37


def enable_x64(on: bool) -> Any:
    """A context manager setting x64: ``jax.enable_x64(bool)`` from 0.8; before it (0.4.38 ... 0.7)
    ``jax.experimental.enable_x64()`` / ``disable_x64()``."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(on)
    from jax import experimental

    return experimental.enable_x64() if on else experimental.disable_x64()


def trace_context() -> Any:
    """JAX's own trace context (every configuration option that changes what a trace gives: the key its
    caches use): jax._src.config.trace_context() on every supported version; None where it is missing."""
    try:
        from jax._src import config

        return config.trace_context()
    except Exception:  # pragma: no cover - depends on JAX internals
        return None


@contextmanager
def no_persistent_cache() -> Iterator[None]:
    """Compiles that must really compile, for what the compiler writes as it goes (``xla_dump_to``: JAX
    leaves dump options out of its persistent cache's key, so a program compiled before is loaded and
    dumps nothing). jax._src.compilation_cache.reset_cache() makes JAX read jax_enable_compilation_cache
    again (it memoizes whether the cache is used): on every supported version; where it is missing, the
    cache is left as it is."""
    try:
        from jax._src import compilation_cache as _cc

        reset, before = _cc.reset_cache, jax.config.jax_enable_compilation_cache  # type: ignore[attr-defined]
    except (ImportError, AttributeError):  # pragma: no cover - depends on JAX internals
        yield
        return
    jax.config.update("jax_enable_compilation_cache", False)
    reset()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", before)
        reset()


def cache_compression() -> str:
    """How JAX compresses the programs it keeps in its persistent cache: "zstd" (Python 3.14's
    ``compression.zstd`` or the zstandard package, where JAX finds either) or "zlib". Programs written one way
    cannot be read the other: each way keeps its own directory."""
    try:
        from jax._src import compilation_cache as _cc
    except ImportError:  # pragma: no cover - depends on JAX internals
        return "zlib"
    return "zstd" if getattr(_cc, "zstd", None) is not None or getattr(_cc, "zstandard", None) is not None else "zlib"


# jax._src.compiler.compile_or_get_cached(...) reads the persistent cache with _cache_read(module_name, cache_key,
# ...) and compiles on a miss; pxla calls it as ``compiler.compile_or_get_cached`` and the key is _cache_read's
# second positional argument on every supported version.
_COMPILES: dict[str, Callable[[str], Any]] = {}


def one_compile_per_program(claim: Callable[[str], bool], release: Callable[[str], None]) -> bool:
    """Around every miss of JAX's persistent cache in this process: ``claim(key)`` says whether to compile
    now (True) or read the cache again (False: another process has just compiled the program); ``release
    (key)`` follows every claimed compile, however it ended. Installed once; a later call replaces the two
    functions. False where this JAX has no such functions (then each process compiles on its own)."""
    import threading

    from jax._src import compiler as _compiler

    _COMPILES.update(claim=claim, release=release)
    if getattr(_compiler.compile_or_get_cached, "_one_per_program", False):
        return True
    read, compile_or_get = getattr(_compiler, "_cache_read", None), getattr(_compiler, "compile_or_get_cached", None)
    if read is None or compile_or_get is None:  # pragma: no cover - depends on JAX internals
        return False
    claimed = threading.local()

    def cache_read(module_name: str, cache_key: str, *rest: Any, **kwargs: Any) -> Any:
        found = read(module_name, cache_key, *rest, **kwargs)
        if found[0] is not None or getattr(claimed, "keys", None) is None:  # a read outside a compile: as it was
            return found
        if _COMPILES["claim"](cache_key):
            claimed.keys.append(cache_key)
            return found
        return read(module_name, cache_key, *rest, **kwargs)

    def compile_or_get_cached(*args: Any, **kwargs: Any) -> Any:
        before = getattr(claimed, "keys", None)
        claimed.keys = []
        try:
            return compile_or_get(*args, **kwargs)
        finally:
            for key in claimed.keys:
                _COMPILES["release"](key)
            claimed.keys = before

    compile_or_get_cached._one_per_program = True  # type: ignore[attr-defined]
    _compiler._cache_read = cache_read
    _compiler.compile_or_get_cached = compile_or_get_cached
    return True


def program_text(lowered: Any) -> str:
    """A ``jax.stages.Lowered``'s StableHLO with its debug locations (file, line, name scope): public API
    on every supported version (``compiler_ir()`` is an MLIR module; ``get_asm`` is MLIR's own)."""
    return lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True, large_elements_limit=None)


def hlo_with_metadata(lowered: Any) -> str | None:
    """The HLO XLA receives, with op metadata (source lines): jax._src.lib.xla_client's HloPrintOptions
    (no public API prints metadata); None where this jaxlib lacks it."""
    try:
        from jax._src.lib import xla_client

        options = xla_client._xla.HloPrintOptions()
        options.print_metadata = True
        return lowered.compiler_ir("hlo").as_hlo_module().to_string(options)
    except Exception:  # pragma: no cover - depends on jaxlib internals
        return None


def _internal_test_util(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(f"jax._src.internal_test_util.{name}")
    except ImportError as e:
        raise ImportError(f"jax {jax.__version__} does not ship its own test utilities (jax._src.internal_test_util."
                          f"{name}; the jax 0.5.3 wheel, for one, leaves them out): the conformance suite needs a "
                          "JAX that does (0.4.38, 0.6.2 to 0.12 do)") from e


def lax_test_util() -> Any:
    """JAX's own op table with test tolerances (jax._src.internal_test_util.lax_test_util)."""
    return _internal_test_util("lax_test_util")


def public_test_util() -> Any:
    """JAX's default test tolerances per dtype (jax._src.public_test_util)."""
    from jax._src import public_test_util as pt

    return pt


def test_harnesses() -> Any:
    """JAX's own primitive test harnesses (jax._src.internal_test_util.test_harnesses): in the jax wheel of
    most versions; an ImportError saying so where it is not."""
    return _internal_test_util("test_harnesses")


# jax._src.interpreters.partial_eval.dce_jaxpr(jaxpr, used_outputs, instantiate) -> (jaxpr, used_inputs): the
# same signature on every supported version.
from jax._src.interpreters import partial_eval as _pe  # noqa: E402


def dce_jaxpr(jaxpr: Any) -> tuple[Any, list[bool]]:
    """``jaxpr`` without the equations no output needs, and which of its inputs it still reads."""
    return _pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=False)


def bind(primitive: Any, operands: Any, params: dict) -> Any:
    """``primitive`` bound to ``operands`` with an equation's ``params``, as jax.core.eval_jaxpr binds it
    (call-like primitives turn their jaxpr param into a function). ``Primitive.get_bind_params`` returns
    (subfuns, params) up to 0.4.38 and later 0.4.x, the params alone in 0.9.2 and after."""
    bound = primitive.get_bind_params(params)
    if isinstance(bound, tuple):
        subfuns, bound = bound
        return primitive.bind(*subfuns, *operands, **bound)
    return primitive.bind(*operands, **bound)


def as_configured(params: dict) -> dict:
    """An equation's ``params`` as tracing it under the current JAX config would have made them: a dot
    product's or convolution's ``precision=None`` becomes ``jax_default_matmul_precision``'s where one is
    set (``lax.dot_general`` reads it at trace time, so binding a recorded equation directly would not)."""
    if "precision" not in params or params["precision"] is not None or not jax.config.jax_default_matmul_precision:  # type: ignore[attr-defined]
        return params
    from jax._src.lax.lax import canonicalize_precision

    return {**params, "precision": canonicalize_precision(None)}


@contextmanager
def export_target(version: str | None) -> Iterator[None]:
    """jax.export, and jax2tf's native serialization through it, writing StableHLO ``version`` ("1.13.7")
    instead of its own target (the version 4 weeks old: ``hlo.get_version_from_compatibility_requirement
    (WEEK_4)``, read by ``jax._src.export._export._module_to_bytecode`` on every supported version). Only
    that module's view of ``hlo`` is changed, and only inside the block. A ValueError names the versions
    this JAX can write where ``version`` is not one of them."""
    if version is None:
        yield
        return
    from jax._src.export import _export

    real, target = _export.hlo, version
    low, high = real.get_minimum_version(), real.get_current_version()
    if not _parse(low) <= _parse(version) <= _parse(high):
        raise ValueError(f"jax {jax.__version__} writes StableHLO {low} to {high}, not {version}")

    class _Target:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def get_version_from_compatibility_requirement(_: Any) -> str:
            return target

        @staticmethod
        def get_minimum_version() -> str:  # what jaxlib's API before version 9 serializes for
            return target

    _export.hlo = _Target()  # type: ignore[assignment]  # a stand-in for the module, inside the block only
    try:
        yield
    finally:
        _export.hlo = real


def stablehlo_versions() -> tuple[str, str, str]:
    """(oldest writable, what jax.export writes by default, newest) StableHLO versions of this JAX."""
    from jax._src.export import _export

    hlo = _export.hlo
    default = (hlo.get_minimum_version() if hlo.get_api_version() < 9 else
               hlo.get_version_from_compatibility_requirement(hlo.StablehloCompatibilityRequirement.WEEK_4))
    return str(hlo.get_minimum_version()), str(default), str(hlo.get_current_version())


# --- jaxpr parameters whose layout changed ---------------------------------------------------------
def scan_layout(params: Any, n_operands: int) -> tuple[int, int]:
    """(number of constants, number of carries) of a "scan" equation's ``params``, whose ``n_operands``
    operands are consts + carry + scanned inputs. Up to 0.10: params ``num_consts`` and ``num_carry``.
    From 0.11: a FlatTree ``ft_in`` of (consts, carry, xs), unpacked by giving it the operand positions."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].update(list(range(n_operands))).unpack()
    return len(list(consts)), len(list(carry))


# The param holding the inner jaxpr of each call-like primitive (names of every supported version).
CALL_PARAM = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
              "core_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
              "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
              "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr",
              "composite": "jaxpr", "custom_dce_call": "fun_jaxpr"}
COMBINER_PARAMS = {"reduce": ("jaxpr", None), "reduce_window": ("jaxpr", "consts"),
                   **{f"scatter{s}": ("update_jaxpr", "update_consts")
                      for s in ("", "-add", "-sub", "-mul", "-min", "-max")}}
