"""The execution-path protocol: one small class per way of running a case.

A path is written ``NAME`` or ``NAME:key=value,key=value``. Classes import their runtime lazily
(in ``run``), so listing paths, parsing specs and saying why one is unavailable cost nothing.
"""

from __future__ import annotations

from contextlib import contextmanager

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from ..result import Fault

from ..result import IdealUncertainty

__all__ = ["CAPABILITIES", "Path", "PathError", "PathOptionError", "PathUnavailable", "as_declared", "jax_config",
           "parse_option_value", "parse_spec", "parse_xla_flags", "spec_env", "without_env"]


# How an XLA option reaches a path's program: jax.jit's compiler_options, or XLA_FLAGS of its serving process.
XlaOptionKind = Literal["compile option", "serving flag"]


class PathError(Exception):
    """A path ran and failed; the message is for the user and names the cause. ``fault``: a
    ``result.Fault`` where the path's runtime is not the one at fault (the converter wrote an invalid model)."""

    def __init__(self, message: str = "", fault: Fault | None = None) -> None:
        super().__init__(message)
        self.fault = fault


class PathUnavailable(PathError):
    """A path cannot run here (a runtime is not installed); the message says how to get it."""


class PathOptionError(ValueError):
    """A path spec names an unknown path or option, or a value of the wrong kind."""


_SPEC = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*)(?:@(?P<env>[A-Za-z][A-Za-z0-9_.-]*))?(?::(?P<opts>.*))?$")


def as_declared(got: Any, want: Any, where: str, notes: list[str]) -> Any:
    """A runtime's output ``got`` in the shape the function declares (``want``, from ``jax.eval_shape``). A
    runtime that returns the same elements with size-1 axes added or dropped (ONNX's ``(1,)`` for a 0-d loss)
    is reshaped, with a note in ``notes``; a shape with other elements is a ``PathError`` naming both."""
    import numpy as np

    got = np.asarray(got)
    if got.shape == tuple(want.shape):
        return got
    if got.size == int(np.prod(want.shape, dtype=np.int64)) and \
            [d for d in got.shape if d != 1] == [d for d in want.shape if d != 1]:
        said = f"{where} came back with shape {got.shape} where the function returns {tuple(want.shape)}: reshaped"
        if said not in notes:
            notes.append(said)
        return got.reshape(want.shape)
    raise PathError(f"{where} has shape {got.shape} where the function returns {tuple(want.shape)}")


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


def parse_xla_flags(flags: str) -> dict[str, str]:
    """``'--xla_a=false --xla_b'`` -> ``{'xla_a': 'false', 'xla_b': 'true'}``: XLA_FLAGS as options."""
    found = {}
    for flag in flags.split():
        key, _, value = flag.lstrip("-").partition("=")
        found[key] = value or "true"
    return found


# What a path can do. Wherever a decision depends on the runtime (which causes can occur, how an option
# reaches it, whether one op can run alone on it), the code asks for one of these, never for a path's name.
CAPABILITIES: dict[str, str] = {
    "takes_xla_options": "XLA compiles the whole program, and XLA options reach it (compile options, or "
                         "XLA_FLAGS of its serving process)",
    "compiled_in_process": "JAX's own jax.jit compiles it in this process: JAX config options and device meshes "
                           "apply, and one op compiles alone with the path's options",
    "another_xla_build": "another build of XLA (TensorFlow's) runs the program JAX exported",
    "other_compiler": "converted for another runtime, which compiles and runs its own artifact with its own kernels",
    "op_by_op": "each primitive runs on its own, as JAX binds it",
    "declared": "the program's declared semantics: each op in float64, rounded to its declared dtype",
    "ideal": "ideal math: every op in float64, never rounded",
    "observed": "outputs read from a file: nothing runs, nothing can be re-run",
}
# Capabilities of a path that can run one op (or one loop iteration) on given inputs, as it runs the program.
REPLAYS_OPS = frozenset({"op_by_op", "compiled_in_process", "declared", "ideal"})


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
    # What the path can do (keys of ``CAPABILITIES``): causes and the explanation's stages ask for these.
    capabilities: ClassVar[frozenset[str]] = frozenset()
    # How an XLA option reaches the program: "compile option" (jax.jit's compiler_options) or "serving flag"
    # (XLA_FLAGS of the serving process); None where no XLA option does.
    xla_option_kind: ClassVar[XlaOptionKind | None] = None
    # Running it converts the program into another runtime in a process of its own: worth a worker of its own.
    heavy: ClassVar[bool] = False
    # A rough guess of one run's cost on a real model, a jit run's being 1 (compiling it op by op, converting
    # it, another compiler): only for spreading paths over workers so that they finish together
    # (``Runners.lanes``); no result reads it.
    cost: ClassVar[float] = 1.0
    # Running it traces the function (eager runs it op by op, observed reads a file): output rules can be read
    # from the trace once it has run.
    traces: ClassVar[bool] = True
    # The package distributions a run of it imports besides JAX (for a reproducer's versions line).
    distributions: ClassVar[tuple[str, ...]] = ()
    # The interpreter's semantics ("declared", "f64") where the path is the jaxpr interpreted op by op; None otherwise.
    mode: ClassVar[Literal["declared", "f64"] | None] = None
    # Outputs of this path cannot be re-run: the path whose run stands in for the system that produced them
    # when a model-side fix is tried (observed: a TensorFlow serving process).
    stand_in: ClassVar[str | None] = None

    def same_artifact_agrees(self, primitive: str, how: str) -> str:
        """What it means that ``same_artifact`` gives this path's values on the op alone: another runtime of
        the same converted model computes it alike, so the conversion is at fault ("maps erf wrongly")."""
        return f"the converter ({self.converter}) maps {primitive} {how}, not the runtime"

    def __init__(self, options: Mapping[str, str] | None = None, env: str | None = None) -> None:
        self.options = dict(options or {})
        self.env = env  # the --env this path runs in; None: this Python environment
        self.notes: list[str] = []  # facts a run wants in the report (versions, artifact sizes...)
        # The f64 path: how far its ideal moves with the constants the program rounded at trace time replaced.
        self.ideal_uncertainty: IdealUncertainty | None = None
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

    def __str__(self) -> str:
        return self.spec

    def has(self, capability: str) -> bool:
        """Does this path have ``capability`` (a key of ``CAPABILITIES``)?"""
        if capability not in CAPABILITIES:
            raise KeyError(f"unknown path capability {capability!r} (known: {', '.join(CAPABILITIES)})")
        return capability in self.capabilities

    @property
    def replayable(self) -> bool:
        """Can this path run one op (or one loop iteration) on given inputs as it runs the whole program? Op by
        op, the interpreter, or JAX compiling the single op with the path's options; not a runtime that runs
        whole converted programs only, nor a path in another environment."""
        return bool(self.capabilities & REPLAYS_OPS) and self.env is None

    @property
    def runs_op_by_op(self) -> bool:
        """Does it compute each op on its own (eager, the interpreter), so that a loop body re-run on its own
        carry gives the same values?"""
        return self.has("op_by_op") or self.mode is not None

    def device(self) -> str:
        """The platform this path computes on ("cpu", "gpu", "tpu"): the host's CPU unless the path runs in
        JAX in this process."""
        return "cpu"

    def xla_settings(self) -> dict[str, str]:
        """The XLA (and JAX) options the program is compiled with on this path, as options of ``jit``: what
        JAX's own XLA needs to compile the same program the same way (compiler evidence, the same-compiler
        experiment). By default the flags of an ``XLA_FLAGS`` option."""
        return parse_xla_flags(self.options.get("XLA_FLAGS", ""))

    def alternatives(self) -> tuple[tuple[Path, str], ...]:
        """Other settings of this runtime that compute the same program another way (kernel sets,
        optimization levels), each with the words of the change: what the fix search tries first, as no
        change to the model is needed. None by default."""
        return ()

    def with_option(self, key: str, value: str) -> Path:
        """The same path, in this environment, with one more option (``jit:jax_default_matmul_precision=...``)."""
        return type(self)({**self.options, key: value})

    def with_xla_option(self, key: str, value: str) -> Path:
        """The same path, in this environment, with one more XLA option, as it reaches this runtime
        (``xla_option_kind``): a compile option, or a flag in its serving process's XLA_FLAGS."""
        if self.xla_option_kind is None:
            raise PathOptionError(f"{self.spec}: no XLA option reaches {self.name}")
        if self.xla_option_kind == "serving flag":
            return self.with_option("XLA_FLAGS", f"{self.options.get('XLA_FLAGS', '')} --{key}={value}".strip())
        return self.with_option(key, value)

    def optimized_hlo(self, fn: Callable[..., Any], args: tuple) -> str | None:
        """The optimized HLO XLA compiles ``fn`` to on this path, as it compiles it (its devices, its options);
        None where this process does not compile it."""
        return None

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        """The source of ``def run_NAME(f, args)``: how a standalone reproducer runs ``f`` this path's way
        (with ``extra`` options too); None where a script cannot (the references' values are written into it
        instead). Each path's runner mirrors its ``run``."""
        return None

    def repro_options(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The path's options with ``extra`` applied: what a reproducer's runner is written with."""
        return {**self.options, **(extra or {})}

    def prestart(self) -> None:  # noqa: B027 - a default, not an abstract method
        """Start what a run of this path will wait for (a serving process) now, in the background, so a
        later run finds it ready; by default nothing."""

    def check_options(self) -> None:  # noqa: B027 - a default, not an abstract method
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
