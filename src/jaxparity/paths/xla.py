"""``jit`` and ``export``: the whole function compiled by XLA, in process or via a serialized artifact.

Both take any XLA compile option as a path option (``jit:xla_allow_excess_precision=false``),
passed to ``Lowered.compile(compiler_options=...)`` as the right Python type.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Callable

from .base import Path, PathError, PathOptionError, PathUnavailable, jax_config, parse_option_value
from .devices import DEVICE_HELP, device_of, on_device, placed_on
from .staging import reused, reusing, signature

# The executables of the last few runs, keyed by (path spec, function, arguments), each held with that
# function and those arguments (so that their ids cannot be reused meanwhile): explaining a path reads the
# optimized HLO of the very compile that produced its numbers, and times a fix on it, instead of compiling
# the model again.
_RECENT: OrderedDict[tuple[str, int, int], tuple[Any, Any, Any]] = OrderedDict()


def _recent(spec: str, fn: Callable[..., Any], args: tuple) -> Any:
    """The executable of the last run of ``fn`` on ``args`` along ``spec``, or None."""
    hit = _RECENT.get((spec, id(fn), id(args)))
    return hit[2] if hit is not None and hit[0] is fn and hit[1] is args else None


def xla_option_names() -> list[str]:
    """The option names this process's XLA lists for ``XLA_FLAGS=--help`` (a JAX started with it prints
    them and stops; XLA cuts the list at about 15,000 characters, so it holds the first ~80 of them)."""
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS="--help", JAX_PLATFORMS="cpu")
    try:
        done = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env, capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"^\s*--(xla_[a-z0-9_]+)=", done.stdout + done.stderr, re.MULTILINE)


def check_xla_flags(spec: str, flags: str) -> None:
    """``XLA_FLAGS`` given to another runtime's process (``savedmodel:XLA_FLAGS=...``): a flag this
    process's XLA does not have and that is one typo from one it has is a usage error with the nearest
    names. A name with no near match is left to that runtime (its XLA may be another version's)."""
    import difflib

    import jax

    for name, value in re.findall(r"--(xla_[A-Za-z0-9_]+)(?:=(\S*))?", flags):
        try:
            options = {name: parse_option_value(value or "true")}
            jax.jit(lambda: 0).lower().compile(compiler_options=options)  # type: ignore[arg-type]  # ints, floats too
        except Exception as e:
            if "No such compile option" not in str(e):
                continue
            near = difflib.get_close_matches(name, xla_option_names(), 3, 0.8)
            if near:
                raise PathOptionError(f"{spec}: XLA has no flag --{name}; did you mean "
                                      f"{' or '.join('--' + n for n in near)}?") from None


def recent_optimized_hlo(spec: str, fn: Callable[..., Any], args: tuple) -> str | None:
    compiled = _recent(spec, fn, args)
    return compiled.as_text() if compiled is not None else None


# Path options that are not XLA compile options: the device mesh a path runs sharded over.
_MESH_OPTIONS = ("mesh", "dim", "device")
_XLA_OPTIONS_HELP = {"*": "any XLA compile option, e.g. xla_allow_excess_precision=false",
                     "mesh": "N: run sharded over N devices (data-parallel: inputs split on dimension `dim`, "
                     "model variables replicated); on CPU the CLI starts JAX with N host devices",
                     "dim": "the input dimension mesh=N splits (default 0); inputs it does not divide are "
                     "replicated",
                     "jax_*": "any JAX config option while tracing and running, e.g. jax_threefry_partitionable=false",
                     "device": DEVICE_HELP}


# How a reproducer runs a function on each path (``Path.repro_runner``); ``{options}``: its compile options.
_RUNNERS = {
    "jit": '''def run_jit(f, args):  # one XLA program, with the path's compile options
    compiled = jax.jit(f).lower(*args).compile(compiler_options={options})
    return [np.asarray(y) for y in compiled(*args)]
''',
    "export": '''def run_export(f, args):  # jax.export -> serialize -> deserialize -> call
    from jax import export
    call = export.deserialize(export.export(jax.jit(f))(*args).serialize()).call
    compiled = jax.jit(call).lower(*args).compile(compiler_options={options})
    return [np.asarray(y) for y in compiled(*args)]
''',
}


class _CompiledPath(Path):
    options_help = _XLA_OPTIONS_HELP
    capabilities = frozenset({"takes_xla_options", "compiled_in_process"})
    xla_option_kind = "compile option"

    def device(self) -> str:
        return device_of(self.options)

    def xla_settings(self) -> dict[str, str]:
        return {k: v for k, v in self.options.items() if k != "load_env"}

    def optimized_hlo(self, fn: Callable[..., Any], args: tuple) -> str | None:
        import jax

        lowered = jax.jit(fn).lower(*self.placed(args))
        return lowered.compile(compiler_options=self.compiler_options()).as_text()  # type: ignore[arg-type]  # ints too

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        options = self.repro_options(extra)
        lowered = {k: parse_option_value(v) for k, v in options.items()
                   if k.islower() and not k.startswith("jax_") and k not in _MESH_OPTIONS}
        runner = _RUNNERS[self.name].format(options=repr(lowered) if lowered else "None")
        if options.get("device"):  # the inputs on that device: JAX compiles and runs there
            head, body = runner.split("\n", 1)
            runner = f"{head}\n    args = jax.device_put(args, jax.devices({options['device']!r})[0])\n{body}"
        return runner

    def check_options(self) -> None:
        """Each XLA compile option set on a trivial program, each JAX option looked up in ``jax.config``:
        a name this XLA or JAX does not have is a usage error with the nearest names it has."""
        import difflib

        import jax

        for key in self.options:
            if key.startswith("jax_") and not hasattr(jax.config, key):
                known = [k for k in getattr(jax.config, "values", {}) if k.startswith("jax_")]
                near = difflib.get_close_matches(key, known, 3)
                raise PathOptionError(f"{self.spec}: no JAX config option {key!r} in jax {jax.__version__}"
                                      + (f"; did you mean {' or '.join(near)}?" if near else ""))
        for key, value in (self.compiler_options() or {}).items():
            try:
                jax.jit(lambda: 0).lower().compile(compiler_options={key: value})  # type: ignore[dict-item]  # ints too
            except Exception as e:
                if "No such compile option" not in str(e):
                    if "While setting option" in str(e) or "compile option" in str(e):
                        raise PathOptionError(f"{self.spec}: XLA rejects {key}={self.options[key]}: "
                                              f"{str(e).splitlines()[0]}") from None
                    continue  # the option exists; whatever else failed is the path's to say when it runs
                near = difflib.get_close_matches(key, xla_option_names(), 3, 0.7)
                if not near and os.environ.get("JAXPARITY_WORKER_JAX_PLATFORMS", "cpu") != "cpu":
                    continue  # checked on the host for a worker that may compile for an accelerator: its XLA says
                raise PathOptionError(f"{self.spec}: XLA has no compile option {key!r}"
                                      + (f"; did you mean {' or '.join(near)}?" if near else
                                         " (XLA_FLAGS=--help lists them)")) from None

    def compiler_options(self) -> dict[str, bool | int | float | str] | None:
        return {k: parse_option_value(v) for k, v in self.options.items()
                if not k.startswith("jax_") and k not in _MESH_OPTIONS} or None

    def placed(self, args: tuple) -> tuple:
        """``args`` on the path's devices: with ``mesh=N``, each input split over N devices on dimension
        ``dim`` where N divides it, and model variables (a ``params`` collection) replicated."""
        if "mesh" not in self.options:
            return placed_on(self.options, args)
        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        try:
            n, dim = int(self.options["mesh"]), int(self.options.get("dim", "0"))
        except ValueError:
            raise PathError(f"{self.spec}: mesh and dim must be whole numbers") from None
        devices = jax.devices()
        if n < 1 or len(devices) < n:
            raise PathUnavailable(
                f"{self.spec} needs {n} devices; this process has {len(devices)} {devices[0].platform} device(s). "
                f"On CPU start JAX with XLA_FLAGS=--xla_force_host_platform_device_count={n} (the jaxparity "
                "command line does this when a path asks for a mesh)")
        mesh = Mesh(np.array(devices[:n]), ("devices",))

        def put(path: Any, x: Any) -> Any:
            names = [str(getattr(k, "key", getattr(k, "name", ""))) for k in path]
            shape = getattr(x, "shape", ())
            split = ("params" not in names and "batch_stats" not in names and len(shape) > dim
                     and shape[dim] % n == 0)
            spec = PartitionSpec(*([None] * dim + ["devices"])) if split else PartitionSpec()
            return jax.device_put(x, NamedSharding(mesh, spec))

        return jax.tree_util.tree_map_with_path(put, args)

    def _compile_and_call(self, fn: Callable[..., Any], args: tuple, key: Callable[..., Any] | None = None,
                          args_key: tuple | None = None) -> Any:
        """Compile ``fn`` (jitted here unless it is already) for ``args`` with the path's options and
        call it. ``key`` and ``args_key`` name the case's own function and arguments for the caches."""
        import jax

        def compile_() -> Any:
            lowered = (fn if hasattr(fn, "trace") else jax.jit(fn)).trace(*args).lower()
            try:
                return lowered.compile(compiler_options=self.compiler_options())
            except Exception as e:
                if self.options and ("compile option" in str(e) or "While setting option" in str(e)):
                    raise PathError(f"XLA rejected the compile options {self.options}: {e}") from e
                raise

        # One executable per (spec, function, shapes, JAX configuration) within compile_once (many-inputs
        # mode, a sweep worker): every input set runs on one compile. Elsewhere every run compiles.
        compiled = reused("executable", (self.spec, id(key or fn), signature(args)), key or fn, compile_)
        held = args_key if args_key is not None else args
        _RECENT[(self.spec, id(key or fn), id(held))] = (key or fn, held, compiled)
        while len(_RECENT) > 16:
            _RECENT.popitem(last=False)
        out = compiled(*args)
        # Many-inputs mode (compile_once) copies a chunk's outputs to the host after dispatching the
        # chunk, which waits for them; blocking here too would cost ~70 µs per sample on CPU.
        return out if reusing() else jax.block_until_ready(out)


    def warm_call(self, fn: Callable[..., Any], args: tuple) -> Callable[[], Any] | None:
        """``fn`` compiled with this path's options, run once: a blocking call for timing a fix's cost. The
        executable of this path's last run of ``fn`` on ``args`` where it is still held (a fix's re-run, the
        path's own run): the program timed is the one that ran, and it is not compiled again."""
        import jax

        from .staging import staged

        recent = _recent(self.spec, fn, args)
        placed = self.placed(args)
        with jax_config(self.options), on_device(self.options):
            if recent is not None:
                leaves = tuple(staged(fn, placed)[1])
                call = lambda: jax.block_until_ready(recent(*leaves))  # noqa: E731
            else:
                compiled = jax.jit(fn).trace(*placed).lower().compile(compiler_options=self.compiler_options())
                call = lambda: jax.block_until_ready(compiled(*placed))  # noqa: E731
        call()  # warm
        return call


class JitPath(_CompiledPath):
    name = "jit"
    summary = "jax.jit on the local device: one XLA program, fused and optimized (mesh=N: sharded over N devices)"

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        from .staging import staged

        with jax_config(self.options), on_device(self.options):
            stage, leaves = staged(fn, self.placed(args))  # the trace export and savedmodel share
            flat = self._compile_and_call(stage.jitted, tuple(leaves), key=fn, args_key=args)
            return jax.tree_util.tree_unflatten(stage.out_tree(leaves), flat)


class ExportPath(_CompiledPath):
    name = "export"
    summary = "jax.export -> serialize -> deserialize -> call: what a JAX serving process runs"
    options_help = {
        **_XLA_OPTIONS_HELP,
        "load_env": "deserialize and call the artifact in another --env's JAX: artifact compatibility",
    }

    def unavailable_reason(self) -> str | None:
        try:
            import flatbuffers  # noqa: F401  (jax.export serializes with it)
        except ImportError:
            return "flatbuffers is not installed (jax.export serializes with it): pip install 'flatbuffers>=24.3'"
        return super().unavailable_reason()

    def compiler_options(self) -> dict[str, bool | int | float | str] | None:
        return {k: parse_option_value(v) for k, v in self.options.items()
                if k != "load_env" and not k.startswith("jax_") and k not in _MESH_OPTIONS} or None

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        with jax_config(self.options), on_device(self.options):
            return self._run(fn, self.placed(args), timeout, args_key=args)

    def _run(self, fn: Callable[..., Any], args: tuple, timeout: float | None, args_key: tuple | None = None) -> Any:
        import jax
        from jax import export

        from .staging import staged

        stage, leaves = staged(fn, args)
        def export_() -> tuple[bytes | bytearray, Any, Any, str]:
            # The artifact is a function of the flat leaves: it holds arrays, not Python pytrees (an NNX
            # module or a dataclass argument cannot be serialized); the structure is restored here. The
            # trace is jit's, and the lowering the one savedmodel's jax2tf gets from JAX's cache.
            platforms = (self.options["device"],) if self.options.get("device") else None
            blob = export.export(stage.jitted, platforms=platforms)(*leaves).serialize()
            restored = export.deserialize(blob)
            artifact = (f"calling convention v{restored.calling_convention_version}, "
                        f"platforms {', '.join(restored.platforms)}")
            return blob, restored, stage.out_tree(leaves), artifact

        # Exported once per (spec, function, shapes, configuration) within compile_once, as executables are.
        key = (self.spec, id(fn), signature(args))
        blob, restored, out_tree, artifact = reused("export artifact", key, fn, export_)
        self.notes.append(f"{len(blob)} byte artifact, {artifact}")
        if "load_env" in self.options:
            flat = self._load_elsewhere(blob, leaves, f"jax {jax.__version__} ({artifact})", timeout)
        else:
            flat = self._compile_and_call(restored.call, tuple(leaves), key=fn, args_key=args_key)
        return jax.tree_util.tree_unflatten(out_tree, flat)

    def _load_elsewhere(self, blob: bytes | bytearray, leaves: list, made_by: str, timeout: float | None) -> list:
        """Call the artifact in environment ``load_env``; what it cannot load is a compatibility failure."""
        import json
        import os
        import subprocess
        import tempfile
        from pathlib import Path

        from ..arrayio import load_arrays, save_arrays
        from ..execution.envs import EnvError, known_env, manifest
        from ..pytree import host

        name = self.options["load_env"]
        try:
            env = known_env(name)
        except EnvError as e:
            raise PathError(str(e)) from e
        loader = Path(__file__).resolve().parents[1] / "serving" / "jax_export_load.py"
        with tempfile.TemporaryDirectory(prefix="jaxparity-export-") as tmp:
            files = [os.path.join(tmp, f) for f in ("artifact.bin", "inputs.npz", "outputs.npz")]
            Path(files[0]).write_bytes(blob)
            save_arrays(files[1], {f"input_{i}": host(x) for i, x in enumerate(leaves)})
            proc = subprocess.run([str(env.python), str(loader), *files], capture_output=True, text=True,
                                  timeout=timeout)
            if proc.returncode != 0:
                errors = [ln for ln in proc.stderr.splitlines() if re.match(r"^[\w.]*(Error|Exception)\b", ln)]
                loaded_by = manifest(env).get("packages", {}).get("jax", "?")
                raise PathError(f"compatibility: the jax.export artifact serialized by {made_by} cannot be called by "
                                f"jax {loaded_by} (environment {name}): {(errors or ['no message'])[-1]}")
            outputs = load_arrays(files[2])
            self.notes.append(f"deserialized and called by jax {json.loads(proc.stdout.splitlines()[-1])['jax']} "
                              f"(environment {name})")
        return [outputs[f"output_{i}"] for i in range(len(outputs))]
