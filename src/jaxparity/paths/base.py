"""The execution-path protocol: one small class per way of running a case.

A path is written ``NAME`` or ``NAME:key=value,key=value``. Classes import their runtime lazily
(in ``run``), so listing paths, parsing specs and saying why one is unavailable cost nothing.
"""

from __future__ import annotations

from contextlib import contextmanager

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

__all__ = ["Path", "PathError", "PathOptionError", "PathUnavailable", "jax_config", "parse_option_value", "parse_spec",
           "spec_env", "without_env"]


class PathError(Exception):
    """A path ran and failed; the message is for the user and names the cause."""


class PathUnavailable(PathError):
    """A path cannot run here (a runtime is not installed); the message says how to get it."""


class PathOptionError(ValueError):
    """A path spec names an unknown path or option, or a value of the wrong kind."""


_SPEC = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*)(?:@(?P<env>[A-Za-z][A-Za-z0-9_.-]*))?(?::(?P<opts>.*))?$")


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``'jit:xla_allow_excess_precision=false'`` -> ``('jit', {'xla_allow_excess_precision': 'false'})``.

    Options are separated by commas; each splits at its first ``=``, so values may contain ``=``
    (``savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false``). An environment suffix
    (``eager@old``) is not part of the name: see ``spec_env``.
    """
    m = _SPEC.match(spec.strip())
    if not m:
        raise PathOptionError(f"{spec!r} is not a path: write NAME[@ENV] or NAME[@ENV]:key=value,...")
    options: dict[str, str] = {}
    if m["name"] == "observed" and m["opts"] and "=" not in m["opts"].split(",")[0]:
        return "observed", {"file": m["opts"]}  # observed:FILE.npz, the shorthand
    for item in filter(None, (m["opts"] or "").split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise PathOptionError(f"{spec!r}: option {item!r} must be written key=value")
        options[key.strip()] = value.strip()
    return m["name"], options


def spec_env(spec: str) -> str | None:
    """The environment a path spec runs in (``'eager@old'`` -> ``'old'``), or None for this one."""
    m = _SPEC.match(spec.strip())
    return m["env"] if m else None


def with_env(spec: str, env: str) -> str:
    """The same path in another environment: ``with_env('jit:a=1', 'old')`` -> ``'jit@old:a=1'``."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise PathOptionError(f"{spec!r} is not a path")
    return f"{m['name']}@{env}" + (f":{m['opts']}" if m["opts"] else "")


def without_env(spec: str) -> str:
    """The same path in the environment that runs it: ``without_env('jit@old:a=1')`` -> ``'jit:a=1'``."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise PathOptionError(f"{spec!r} is not a path")
    return m["name"] + (f":{m['opts']}" if m["opts"] else "")


@contextmanager
def jax_config(options: Mapping[str, str]) -> Iterator[None]:
    """The path's ``jax_*`` options (``jit:jax_threefry_partitionable=false``) set as JAX config
    while it traces and runs, restored after."""
    import jax

    keys = [k for k in options if k.startswith("jax_")]
    saved = {}
    try:
        for k in keys:  # only setting an option can name one that does not exist: the path's own errors pass
            try:
                saved[k] = getattr(jax.config, k)
                jax.config.update(k, parse_option_value(options[k]))
            except AttributeError as e:
                raise PathOptionError(f"no JAX config option {k!r} in jax {jax.__version__}: see jax.config") from e
        yield
    finally:
        for k, v in saved.items():
            jax.config.update(k, v)


def parse_option_value(text: str) -> bool | int | float | str:
    """XLA wants Python bools, ints and floats: 'false' -> False, '3' -> 3, '0.5' -> 0.5."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Path(ABC):
    """One way of executing a case. Subclasses set the class attributes and implement ``run``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    # References define what the numbers should be; they are reported but never gate the exit code.
    reference: ClassVar[bool] = False
    # Option names and their help. ``"*"`` accepts any lowercase key (XLA compile options);
    # ``"ENV"`` accepts any UPPERCASE key as an environment variable of the serving process;
    # ``"jax_*"`` any JAX config option, set while the path traces and runs (``jax_config``).
    options_help: ClassVar[Mapping[str, str]] = {}
    # Another path that runs the artifact this path converts to, with another runtime (onnx and onnx-ref
    # run the same jax2onnx model): where both give the same values on an op, the converter is at fault,
    # not this runtime's kernel.
    same_artifact: ClassVar[str | None] = None
    converter: ClassVar[str] = ""  # what makes that artifact, for sentences ("jax2onnx")
    # The runtime has no PRNG key type nor threefry's unsigned shifts: where it fails, the program's random
    # numbers are the likely reason, and said (``localize.refusals.random_hint``).
    refuses_random: ClassVar[bool] = False
    # A run waits on a process of its own (a serving process): runs under other serving environments can
    # overlap, each from a thread of this process (what a run prepares here is serialized by the path).
    overlaps: ClassVar[bool] = False

    def same_artifact_agrees(self, primitive: str, how: str) -> str:
        """What it means that ``same_artifact`` gives this path's values on the op alone: another runtime of
        the same converted model computes it alike, so the conversion is at fault ("maps erf wrongly")."""
        return f"the converter ({self.converter}) maps {primitive} {how}, not the runtime"

    def __init__(self, options: Mapping[str, str] | None = None, env: str | None = None) -> None:
        self.options = dict(options or {})
        self.env = env  # the --env this path runs in; None: this Python environment
        self.notes: list[str] = []  # facts a run wants in the report (versions, artifact sizes...)
        for key in self.options:
            if key.isupper() and "ENV" in self.options_help:
                continue
            if key in self.options_help or (key.islower() and "*" in self.options_help):
                continue
            if key.startswith("jax_") and "jax_*" in self.options_help:
                continue
            import difflib

            names = [k for k in self.options_help if k not in ("*", "ENV")]
            near = difflib.get_close_matches(key, names, 2)
            raise PathOptionError(f"path {self.name!r} has no option {key!r}"
                                  + (f"; did you mean {' or '.join(near)}?" if near else "")
                                  + f" (options: {', '.join(names) or 'none'})")

    def prestart(self) -> None:
        """Start what a run of this path will wait for (a serving process) now, in the background, so a
        later run finds it ready; by default nothing."""

    def check_options(self) -> None:
        """Raise ``PathOptionError`` (with the nearest names) for an option the runtime itself does not
        know, before anything runs: an XLA compile option misspelled. Options ``options_help`` names are
        checked when the path is made; by default nothing more."""

    @property
    def spec(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options.items())
        name = f"{self.name}@{self.env}" if self.env else self.name
        return f"{name}:{opts}" if opts else name

    def unavailable_reason(self) -> str | None:
        """Why this path cannot run here, or None when it can."""
        return None

    @abstractmethod
    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        """Execute ``fn(*args)`` this path's way and return its outputs (a pytree of arrays)."""

    def start(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Callable[[], Any]:
        """A run in two halves: what this process does (trace, convert) now, under its JAX configuration
        of now, and a function that finishes the run and returns ``run``'s outputs. Where ``overlaps``,
        that function only waits on another process and may be called from another thread; by default
        the whole run happens when it is called."""
        return lambda: self.run(fn, args, timeout=timeout)

    def artifact(self, fn: Callable[..., Any], args: tuple) -> Any:
        """What this runtime really runs for ``fn(*args)``, read back from its own artifact, with every
        tensor's value in one run of it on ``args`` (``paths.artifact.Artifact``); None where the path runs
        the program as JAX traced it (XLA compiles the jaxpr's own ops) or cannot be read back."""
        return None

    # How notes from ``evidence`` are labelled ("IREE: ...").
    evidence_label: ClassVar[str] = ""

    def evidence(self, fn: Callable[..., Any], args: tuple) -> list[str]:
        """The runtime's own words on how it compiles ``fn`` for ``args`` (IREE: the bf16 arithmetic its CPU
        pipeline computes in float32), one line each, as notes for the report; none by default."""
        return []

    def kernel_variants(self, kernel: Any) -> list[tuple[str, str]]:
        """Other semantics this runtime offers for one kernel of its artifact (``Artifact.kernels``), each as
        (what it changes, the path spec that runs it): ONNX node attributes such as Resize's exclude_outside.
        Tried where that kernel is where the path departs; none by default."""
        return []

    def warm_call(self, fn: Callable[..., Any], args: tuple) -> Callable[[], Any] | None:
        """A call of ``fn(*args)`` this path's way, compiled and run once already, that blocks until its
        result is ready: what a fix's run-time cost is timed with (``execution.timing``). None where each
        run is a fresh process or conversion."""
        return None
