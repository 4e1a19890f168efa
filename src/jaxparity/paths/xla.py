"""``jit`` and ``export``: the whole function compiled by XLA, in process or via a serialized artifact.

Both take any XLA compile option as a path option (``jit:xla_allow_excess_precision=false``),
passed to ``Lowered.compile(compiler_options=...)`` as the right Python type.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from .base import Path, PathError, parse_option_value

# The executables of the last few runs, keyed by (path spec, function, arguments): explaining a
# path reads the optimized HLO of the very compile that produced its numbers instead of compiling
# the model again.
_RECENT: OrderedDict[tuple[str, int, int], Any] = OrderedDict()


def recent_optimized_hlo(spec: str, fn: Callable[..., Any], args: tuple) -> str | None:
    compiled = _RECENT.get((spec, id(fn), id(args)))
    return compiled.as_text() if compiled is not None else None


_XLA_OPTIONS_HELP = {"*": "any XLA compile option, e.g. xla_allow_excess_precision=false"}


class _CompiledPath(Path):
    options_help = _XLA_OPTIONS_HELP

    def compiler_options(self) -> dict[str, bool | int | float | str] | None:
        return {k: parse_option_value(v) for k, v in self.options.items()} or None

    def _compile_and_call(self, fn: Callable[..., Any], args: tuple, key: Callable[..., Any] | None = None) -> Any:
        import jax

        lowered = jax.jit(fn).lower(*args)
        try:
            compiled = lowered.compile(compiler_options=self.compiler_options())
        except Exception as e:
            if self.options and ("compile option" in str(e) or "While setting option" in str(e)):
                raise PathError(f"XLA rejected the compile options {self.options}: {e}") from e
            raise
        _RECENT[(self.spec, id(key or fn), id(args))] = compiled
        while len(_RECENT) > 8:
            _RECENT.popitem(last=False)
        return jax.block_until_ready(compiled(*args))


class JitPath(_CompiledPath):
    name = "jit"
    summary = "jax.jit on the local device: one XLA program, fused and optimized"

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        return self._compile_and_call(fn, args)


class ExportPath(_CompiledPath):
    name = "export"
    summary = "jax.export -> serialize -> deserialize -> call: what a JAX serving process runs"

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax
        from jax import export

        exported = export.export(jax.jit(fn))(*args)
        blob = exported.serialize()
        restored = export.deserialize(blob)
        self.notes.append(
            f"{len(blob)} byte artifact, calling convention v{restored.calling_convention_version}, "
            f"platforms {', '.join(restored.platforms)}"
        )
        return self._compile_and_call(restored.call, args, key=fn)
