"""Host callbacks in a program, named: each call that runs Python on the host (``pure_callback``,
``io_callback``, ``debug_callback``, ``debug_print``, a staged ``checkify`` check), inside nested jaxprs too
(jit, cond, while, scan, custom_jvp/vjp...), with the user's line, the library's line that made it, and the
library's switch that takes it out of the program where one is known (``SWITCHES``). No serialized program
carries a host callback: a path that failed on one ("serialization of host_callbacks is not yet
implemented", "No plugins registered for primitive 'pure_callback'") is reported with these instead of the
runtime's bare words (``execution.inprocess``; the words: ``report.callbacks``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..jaxcompat import user_frames
from ..result import HostCallback
from .program import frame_line, library_frames

__all__ = ["SWITCHES", "Switch", "find_callbacks", "names_a_callback"]

# The primitives that call back into Python on the host (jax 0.4.38 to 0.9: jax.debug.print is a
# debug_callback before its own debug_print primitive); ``check`` is checkify's, a callback only where staged
# under jax_experimental_unsafe_xla_runtime_errors (with debug=False).
_PRIMITIVES = ("pure_callback", "io_callback", "debug_callback", "debug_print", "check")

# What a runtime's refusal says when a host callback is its reason: JAX's export, jax2onnx's missing plugin,
# IREE's illegal custom call.
_NAMED = re.compile(r"host_callback|pure_callback|io_callback|debug_callback|debug_print|python_cpu_callback|"
                    r"python_gpu_callback|primitive 'check'")


@dataclass(frozen=True)
class Switch:
    """How a library's host callbacks leave the program: the library, what marks its calls (a frame in one of
    its folders, or the primitive), what puts them there, and the switch (in words and as environment
    settings), or, where no switch is known, what to change instead."""

    library: str
    calls: str  # what in the library makes the callback
    switch: str | None  # the library's own switch, in words; None: none is known
    instead: str | None = None  # where none is: the change to the model that takes them out
    folders: tuple[str, ...] = ()  # a frame in one of these marks the call as the library's
    primitives: tuple[str, ...] = ()  # or the callback's primitive does
    env: tuple[tuple[str, str], ...] = ()  # settings of the environment that take the callbacks out


# First match wins: a library's frames before a primitive (Equinox's error_if under EQX_ON_ERROR=breakpoint
# calls jax.debug.breakpoint, diffrax calls error_if: both are Equinox's).
SWITCHES: tuple[Switch, ...] = (
    Switch("equinox", "Equinox's error_if / branched_error_if (runtime checks, as in diffrax's step-size controller)",
           "EQX_ON_ERROR=nan in the environment that starts jaxparity (Equinox reads it when imported): a failed "
           "check then gives NaN instead of raising, on every path alike, and leaves no callback",
           folders=("equinox",), env=(("EQX_ON_ERROR", "nan"),)),
    Switch("jax.debug", "jax.debug.print / callback / breakpoint", None,
           "remove the debug call, or guard it with a Python flag of your own so that the function you serve "
           "holds none", primitives=("debug_print", "debug_callback")),
    Switch("checkify", "a checkify.check staged under jax_experimental_unsafe_xla_runtime_errors", None,
           "serve checkify.checkify(fn) instead: its checks become an error value returned beside the outputs "
           "(ordinary ops), read with err.get() or err.throw() outside it", primitives=("check",)),
)

# A callback of no known library (the user's own pure_callback or io_callback).
_INSTEAD = ("compute it in JAX, or pass its result in as an input: a pure_callback / io_callback runs Python on "
            "the host, which no exported or converted program can carry")


def find_callbacks(fn: Callable[..., Any], args: tuple) -> tuple[HostCallback, ...]:
    """Every host callback of ``fn(*args)``'s program, nested jaxprs included, in program order; () where there
    is none or the function does not trace."""
    import jax

    try:
        closed = jax.make_jaxpr(fn)(*args)
    except Exception:  # noqa: BLE001 - a courtesy: the path's own error stands without it
        return ()
    return tuple(_named(eqn, frames) for eqn, frames in _walk(closed.jaxpr, ()))


def _walk(jaxpr: Any, outer: tuple[Any, ...]) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """(equation, its frames innermost first) of each callback in ``jaxpr`` and every jaxpr nested in its
    equations. An equation traced inside a library's nested trace (the branch of Equinox's cond) may keep no
    frame of the user's: the frames of the equations around it follow its own."""
    from jax.extend import core

    for eqn in jaxpr.eqns:
        frames = tuple(user_frames(eqn.source_info)) + outer
        if eqn.primitive.name in _PRIMITIVES and not (eqn.primitive.name == "check" and eqn.params.get("debug")):
            yield eqn, frames
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, core.ClosedJaxpr):
                    yield from _walk(sub.jaxpr, frames)
                elif isinstance(sub, core.Jaxpr):
                    yield from _walk(sub, frames)


def _named(eqn: Any, frames: Sequence[Any]) -> HostCallback:
    """One callback with its user's line, the library's lines, and the switch of the first row that matches."""
    library, user = library_frames(frames)
    primitive = eqn.primitive.name
    folders = {frame_line(f).split("/", 1)[0] for f in library}
    row = next((s for s in SWITCHES if folders.intersection(s.folders) or primitive in s.primitives), None)
    inner = frame_line(library[0]) if library else None
    via = frame_line(library[-1]) if len(library) > 1 and frame_line(library[-1]) != inner else None
    return HostCallback(primitive=primitive, user_source=frame_line(user) if user is not None else None,
                        library_source=inner, via=via, library=row.library if row else None,
                        origin=row.calls if row else None, switch=row.switch if row else None,
                        instead=row.instead if row else _INSTEAD, env=dict(row.env) if row else {})


def names_a_callback(message: str | None) -> bool:
    """Whether a runtime's error names a host callback as what it cannot take."""
    return bool(message) and _NAMED.search(message or "") is not None
