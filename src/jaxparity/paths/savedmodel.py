"""``savedmodel``: jax2tf -> ``tf.saved_model.save`` -> served in a TensorFlow process of its own.

The conversion happens here, next to JAX (or comes from jaxparity's cache); the serving happens in a
separate process that imports TensorFlow and not JAX and runs the ``serve`` signature through
``Session.run``, as TensorFlow Serving does. That process is kept warm for the next run in the same
serving environment (``execution.warm``): each model in a graph and session of its own, as TensorFlow
Serving holds many; one that dies or hangs is replaced. Options in capitals set that process's environment
(``savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false``); there is no per-model XLA option in
a SavedModel.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
import threading
from pathlib import Path as FsPath
from collections.abc import Mapping
from typing import Any, Callable

from .base import Path, PathError, PathOptionError, parse_option_value

_SERVER = FsPath(__file__).resolve().parents[1] / "serving" / "tf_savedmodel.py"
_PREPARE = threading.RLock()  # converting and saving (jax2tf, TensorFlow's graph building): one thread at a time
# Variables that do not make another serving environment: what importing a library puts into this
# process's environment (TensorFlow 2.21: TF2_BEHAVIOR...; Keras 3 on another backend, which TensorFlow
# imports: TF_FORCE_GPU_ALLOW_GROWTH; JAX's Mosaic GPU, which Keras's JAX backend imports: CUDA_ROOT; IREE's
# compiler 3.13: TPU_SKIP_MDS_QUERY, TF_CPP_MIN_LOG_LEVEL; the serving process sets them itself where it
# imports them), and pytest's name of the test running now (a new value for every test of a session).
# Without them a worker that had run IREE before the SavedModel started a serving process of its own, and
# the other worker a third for its re-runs, each importing TensorFlow again.
_TF_SETS = frozenset({"TF2_BEHAVIOR", "TPU_ML_PLATFORM", "TPU_ML_PLATFORM_VERSION", "HDF5_PLUGIN_PATH",
                      "ENABLE_RUNTIME_UPTIME_TELEMETRY", "TF_FORCE_GPU_ALLOW_GROWTH", "CUDA_ROOT",
                      "TPU_SKIP_MDS_QUERY", "TF_CPP_MIN_LOG_LEVEL", "PYTEST_CURRENT_TEST"})


def _describe_call_module(node: Any) -> str:
    """'XlaCallModule version 10, StableHLO 1.13.7': what a loader must understand."""
    text = f"XlaCallModule version {node.attr['version'].i}"
    found = re.search(rb"StableHLO_v(\d+\.\d+\.\d+)", node.attr["module"].s)
    return text + (f", StableHLO {found.group(1).decode()}" if found else "")


def _stablehlo_skew(message: str) -> tuple[str, str, list[str]] | None:
    """(the StableHLO version the artifact was written in, the one the loader reads, the source locations its
    error names) from TensorFlow's "in bytecode version 6 produced by: StableHLO_v1.18.0 … failed to
    deserialize portable artifact using StableHLO_v1.13.7"; None for any other failure."""
    written = re.search(r"produced by:\s*StableHLO_v(\d+\.\d+\.\d+)", message)
    read = re.search(r"deserialize portable artifact using\s*StableHLO_v(\d+\.\d+\.\d+)", message)
    if not (written and read):
        return None
    where = re.findall(r"([\w.-]+\.py):(\d+):\d+: note: in bytecode version", message)
    return written.group(1), read.group(1), list(dict.fromkeys(f"{f}:{n}" for f, n in where))


def _missing(module: str) -> bool:
    """Not importable here (``sys.modules[name] = None`` is how Python marks a blocked module)."""
    if module in sys.modules:
        return sys.modules[module] is None
    return importlib.util.find_spec(module) is None


_NOISE = re.compile(r"^(WARNING|[IW]\d{4} |Instructions for updating|Use `tf\.|.*is deprecated)")


def _tail(text: str, lines: int = 4) -> str:
    """The last lines that say something: TensorFlow's warnings and deprecation notices dropped."""
    kept = [ln for ln in text.strip().splitlines() if ln.strip() and not _NOISE.match(ln.strip())]
    return "\n".join(kept[-lines:])


# How a reproducer runs a function as a SavedModel (``Path.repro_runner``); XLA_FLAGS are set in the script's
# environment, as the path sets them in its serving process.
_RUNNER = '''def run_savedmodel(f, args):  # jax2tf -> SavedModel (left in ./repro_savedmodel) -> TensorFlow
    import tensorflow as tf
    from jax.experimental import jax2tf
    module = tf.Module()
    module.f = tf.function(jax2tf.convert(f, with_gradient=False), autograph=False,
                           input_signature=[tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)) for x in args])
    tf.saved_model.save(module, "repro_savedmodel")
    return [np.asarray(y) for y in tf.saved_model.load("repro_savedmodel").f(*args)]
'''


class SavedModelPath(Path):
    name = "savedmodel"
    overlaps = True  # a run waits on its serving process
    capabilities = frozenset({"takes_xla_options", "another_xla_build"})
    xla_option_kind = "serving flag"
    heavy = True
    cost = 2.5  # jax2tf, then XLA in TensorFlow's serving process (which imports TensorFlow)
    distributions = ("tensorflow-cpu", "tensorflow")
    summary = "jax2tf SavedModel, loaded with tag 'serve' and run by Session.run in a TF process without JAX"
    options_help = {
        "ENV": "an environment variable of the serving process, e.g. XLA_FLAGS=--xla_allow_excess_precision=false",
        "keep": "a directory to keep the SavedModel in (default: a temporary one)",
        "native_serialization": "false: jax2tf's non-native (TF ops) lowering; only JAX before 0.5 honours it",
        "serve_env": "serve in another --env's TensorFlow (export here, load there): artifact compatibility",
        "stablehlo": "the StableHLO version to export for, e.g. 1.13.7 (what TensorFlow 2.21 reads); default: "
                     "jax.export's own target, 4 weeks old",
    }

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        return _RUNNER

    def check_options(self) -> None:
        """A misspelled flag in the serving process's ``XLA_FLAGS``: a usage error with the nearest names."""
        from .xla import check_xla_flags

        if self.options.get("XLA_FLAGS"):
            check_xla_flags(self.spec, self.options["XLA_FLAGS"])

    def unavailable_reason(self) -> str | None:
        if _missing("tensorflow"):
            return "TensorFlow is not installed: pip install 'jaxparity[tensorflow]' (tensorflow-cpu)"
        return None

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)  # Python scalars get JAX's dtypes
        try:
            return self._run(fn, args, timeout)
        except PathError as e:
            skew = _stablehlo_skew(str(e))
            if skew is None or "serve_env" in self.options or self.options.get("stablehlo") == skew[1]:
                raise
            raise PathError(self._skew_finding(fn, args, timeout, *skew)) from e

    def _run(self, fn: Callable[..., Any], args: tuple, timeout: float | None) -> Any:
        return self._start(fn, args, timeout)()

    def start(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Callable[[], Any]:
        """Convert and save now (here, under this thread's JAX configuration); the function returned serves
        the model in the serving process and waits for its answer (``overlaps``: from any thread)."""
        import jax

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)
        finish = self._start(fn, args, timeout)

        def served() -> Any:
            try:
                return finish()
            except PathError as e:
                skew = _stablehlo_skew(str(e))
                if skew is None or "serve_env" in self.options or self.options.get("stablehlo") == skew[1]:
                    raise
                raise PathError(self._skew_finding(fn, args, timeout, *skew)) from e

        return served

    def _start(self, fn: Callable[..., Any], args: tuple, timeout: float | None) -> Callable[[], Any]:
        import shutil

        import jax

        from ..pytree import host

        tmp = tempfile.mkdtemp(prefix="jaxparity-savedmodel-", dir=_scratch())
        try:
            with _PREPARE:  # one conversion at a time, whichever thread asks; serving overlaps
                server = self._start_server()  # imports TensorFlow while this process converts and saves
                try:
                    model_dir, out_tree = self._saved(fn, args, tmp)
                except BaseException:
                    from ..execution.warm import give_back

                    give_back(server)  # it served nothing: the next run takes it
                    raise
                inputs = {f"input_{i}": host(x) for i, x in enumerate(jax.tree_util.tree_leaves(args))}
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

        def finish() -> Any:
            try:
                outputs = self._serve(model_dir, inputs, tmp, timeout, server)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            flat = [outputs[f"output_{i}"] for i in range(out_tree.num_leaves)]
            return jax.tree_util.tree_unflatten(out_tree, flat)

        return finish

    def _skew_finding(self, fn: Callable[..., Any], args: tuple, timeout: float | None, written: str, read: str,
                      where: list[str]) -> str:
        """The serving TensorFlow cannot read the StableHLO this JAX wrote: say which versions and where
        TensorFlow's error points, then export for the version it reads and say whether that loads, runs and
        gives jax.jit's values (the fix, verified)."""
        import jax
        import numpy as np

        from ..jaxcompat import stablehlo_versions

        low, _, high = stablehlo_versions()
        why = "the stablehlo option" if "stablehlo" in self.options else "jax.export's target, 4 weeks old"
        text = (f"compatibility: TensorFlow cannot read the StableHLO this JAX wrote: jax {jax.__version__} writes "
                f"StableHLO {written} ({why}; it can write {low} to {high}), the serving TensorFlow reads up to {read}")
        if where:
            text += f"; its error points at {', '.join(where)}"
        fixed = f"{self.name}:" + ",".join(f"{k}={v}" for k, v in {**self.options, "stablehlo": read}.items())
        try:
            again = type(self)({**self.options, "stablehlo": read}, env=self.env)
            got = jax.tree_util.tree_leaves(again.run(fn, args, timeout=timeout))
        except (PathError, ValueError) as e:
            return text + f". Exported for {read} ({fixed}) it fails too: {str(e).splitlines()[0]}"
        want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
        differing = sum(not (np.asarray(a).shape == np.asarray(b).shape and
                             np.asarray(a).tobytes() == np.asarray(b).tobytes()) for a, b in zip(got, want))
        if differing == 0:
            return text + (f". Fix ✓ verified: exported for StableHLO {read} ({fixed}) it loads, runs and gives "
                           "jax.jit's values bit for bit")
        return text + (f". Exported for StableHLO {read} ({fixed}) it loads and runs, and {differing} of its "
                       f"{len(got)} outputs differ from jax.jit's: compare it with --paths {fixed}")

    def conversion_key(self, fn: Callable[..., Any], args: tuple) -> str:
        """What the SavedModel depends on: the program, the options that change the conversion (not the
        serving process's environment: an XLA flag re-run serves the same SavedModel) and the versions."""
        from ..cache import fingerprint, package_versions
        from .staging import staged

        stage, leaves = staged(fn, args)
        return fingerprint("savedmodel", stage.program_key(leaves),
                           {k: v for k, v in self.options.items() if k in ("native_serialization", "stablehlo")},
                           package_versions("tensorflow", "tensorflow-cpu"))

    def _saved(self, fn: Callable[..., Any], args: tuple, scratch: str) -> tuple[str, Any]:
        """The SavedModel directory to serve and the output's tree: converted here, or the one converted
        before from the same program, options and versions (the cache; its notes said again)."""
        import shutil

        from ..cache import cache
        from .staging import staged

        store, keep = cache(), self.options.get("keep")
        if store is None:
            model_dir = keep or os.path.join(scratch, "model")
            return model_dir, self._save(fn, args, model_dir)
        before = len(self.notes)

        def make(where: Any) -> dict[str, Any]:
            self._save(fn, args, str(where / "model"))
            return {"notes": self.notes[before:], "artifact": self._artifact, "exported_by": self._exported_by}

        entry = store.fetch("savedmodel", self.conversion_key(fn, args), make)
        if entry.reused:
            self.notes.extend(entry.meta["notes"])
            self._artifact, self._exported_by = entry.meta["artifact"], entry.meta["exported_by"]
        if entry.reused and entry.earlier:
            self.notes.append(f"SavedModel reused from jaxparity's cache (entry {entry.short}: same program, "
                              "options and versions; --no-cache converts again)")
        model_dir = str(entry.dir / "model")  # served from the cache, where a serving process reads
        if keep:
            shutil.copytree(model_dir, keep, dirs_exist_ok=True)
        stage, leaves = staged(fn, args)
        return model_dir, stage.out_tree(leaves)

    def _save(self, fn: Callable[..., Any], args: tuple, model_dir: str) -> Any:
        """Convert with jax2tf and save with a ``serving_default`` signature of flat tensors (for the StableHLO
        version of the ``stablehlo`` option, where given)."""
        from ..jaxcompat import export_target

        try:
            with export_target(self.options.get("stablehlo")):
                return self._convert_and_save(fn, args, model_dir)
        except ValueError as e:
            if "writes StableHLO" not in str(e):
                raise
            raise PathOptionError(f"{self.spec}: {e}") from e

    def _convert_and_save(self, fn: Callable[..., Any], args: tuple, model_dir: str) -> Any:
        import jax
        import tensorflow as tf
        from jax.experimental import jax2tf

        from ..pytree import argument_leaves
        from .staging import keys_as_data, staged

        # The case's shared trace (see staging): jax2tf serializes the same jitted function export
        # does, so JAX lowers it once for both. A PRNG key (an NNX module's Rngs) crosses the signature as
        # its key data and is wrapped again inside: the program draws what JAX's draws.
        stage, keyed = staged(fn, args)
        out_tree = stage.out_tree(keyed)
        function, leaves, impls = keys_as_data(stage.jitted, keyed)
        if any(impl is not None for impl in impls):
            self.notes.append("PRNG keys cross the signature as their key data (uint32), wrapped again inside: "
                              + ", ".join(n for (n, _), i in zip(argument_leaves(args), impls) if i is not None))

        specs = [
            tf.TensorSpec(x.shape, tf.dtypes.as_dtype(x.dtype), name=f"input_{i}") for i, x in enumerate(leaves)
        ]
        convert_options = {}
        if "native_serialization" in self.options:
            convert_options["native_serialization"] = parse_option_value(self.options["native_serialization"])
        converted = jax2tf.convert(function, with_gradient=False, **convert_options)

        def named(*xs: Any) -> dict[str, Any]:
            return {f"output_{i}": y for i, y in enumerate(converted(*xs))}

        serve = tf.function(named, autograph=False, input_signature=specs)
        module = tf.Module()
        module.serve = serve
        concrete = serve.get_concrete_function()
        graph = concrete.graph.as_graph_def()
        nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
        ops = {n.op for n in nodes}
        self._artifact = [_describe_call_module(n) for n in nodes if n.op == "XlaCallModule"]
        self._exported_by = f"jax {jax.__version__} / TensorFlow {tf.__version__}"
        if convert_options.get("native_serialization") is False and "XlaCallModule" in ops:
            self.notes.append(f"jax {jax.__version__} ignores native_serialization=false: the model is still "
                              "one XlaCallModule (StableHLO)")
        tf.saved_model.save(module, model_dir, signatures={"serving_default": concrete})
        self.notes.append(f"exported by jax {jax.__version__} / TensorFlow {tf.__version__} "
                          f"({'XlaCallModule' if 'XlaCallModule' in ops else 'TF ops'})")
        return out_tree

    def _compatibility(self, output: str) -> None:
        """A SavedModel the other environment's TensorFlow cannot load: name both sides and the fault."""
        from ..execution.envs import known_env, manifest

        env = self.options["serve_env"]
        packages = manifest(known_env(env)).get("packages", {})
        served = f"TensorFlow {packages.get('tensorflow-cpu') or packages.get('tensorflow', '?')}"
        lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not _NOISE.match(ln.strip())]
        reason = next((ln for ln in lines if "deserialize" in ln.lower()), None) or next(
            (ln for ln in lines if re.search(r"version|vhlo|unknown|not supported", ln, re.I)),
            lines[-1] if lines else "no message")
        faults = [f"attribute {a} of {op}" for a, op in re.findall(r"mentions attribute (\w+) which is not in the "
                                                                   r"op definition:\s*Op<name=(\w+)", output)]
        faults += re.findall(r"(?:vhlo|stablehlo|chlo)\.[\w.]+", output)
        at_fault = ", ".join(dict.fromkeys(faults)) or "unknown"
        raise PathError(f"compatibility: the SavedModel exported by {self._exported_by} cannot be loaded by "
                        f"{served} (environment {env}): {reason.rsplit(': ', 1)[-1]}; at fault: {at_fault}; the "
                        f"model holds {'; '.join(self._artifact) or 'no XlaCallModule'}")

    def prestart(self) -> None:
        """The serving process of this path's environment started now (``execution.warm.prestart``)."""
        from ..execution.warm import prestart

        prestart(*self._server_command())

    def _start_server(self) -> Any:
        """The TensorFlow serving process for this path's environment: a warm one that served before
        (``execution.warm``), or one started now, which imports TensorFlow while this process converts
        and saves the model."""
        from ..execution.warm import warm

        return warm(*self._server_command())

    def _server_command(self) -> tuple[list[str], dict[str, str], frozenset[str]]:
        env = dict(os.environ)
        env.update({k: v for k, v in self.options.items() if k.isupper()})
        python = sys.executable
        if "serve_env" in self.options:
            from ..execution.envs import EnvError, known_env

            try:
                python = str(known_env(self.options["serve_env"]).python)
            except EnvError as e:
                raise PathError(str(e)) from e
        # The serving process never imports JAX (tf_savedmodel._NoJax): JAX's own variables (a worker's
        # JAX_PLATFORMS=cpu, which the command's first worker does not have) change nothing in it.
        return [python, str(_SERVER), "--serve"], env, _TF_SETS | {k for k in env if k.startswith("JAX_")}

    def _serve(self, model_dir: str, inputs: dict, tmp: str, timeout: float | None, server: Any = None) -> dict:
        from ..arrayio import load_arrays, save_arrays
        from ..execution.warm import WarmDied, give_back

        in_file, out_file = os.path.join(tmp, "inputs.npz"), os.path.join(tmp, "outputs.npz")
        save_arrays(in_file, inputs)
        server = server or self._start_server()
        request = f"{model_dir}\t{in_file}\t{out_file}"
        try:
            try:
                report = server.request(request, timeout)
            except WarmDied as e:
                if not server.served or e.returncode is None:
                    raise
                # A warm process that died is not this model's failure until a fresh one fails on it too.
                server = self._start_server()
                report = server.request(request, timeout)
        except WarmDied as e:
            if "serve_env" in self.options and e.returncode is not None:
                self._compatibility(e.output)
            if e.returncode is None:
                raise PathError(f"the TensorFlow serving process did not answer within {timeout:g} s") from None
            raise PathError(f"{e}:\n{_tail(e.output)}") from None
        if "error" in report:
            give_back(server)
            if "serve_env" in self.options:
                self._compatibility(report["error"] + server.output())
            raise PathError(f"the TensorFlow serving process failed:\n{_tail(report['error'])}")
        give_back(server)
        if report.get("jax_imported"):
            raise PathError("the serving process imported JAX; it must run TensorFlow alone")
        env_note = ", ".join(f"{k}={v}" for k, v in self.options.items() if k.isupper())
        between = " between commands" if getattr(server, "outlives", False) else ""
        loaded = ", this model already loaded there, as TensorFlow Serving keeps it" if report.get("loaded_before") \
            else ""
        again = (f"; the same process served {server.served - 1} request{'s' if server.served > 2 else ''} before "
                 f"(kept warm{between}, each model in its own graph and session{loaded})" if server.served > 1 else "")
        self.notes.append(
            f"served by TensorFlow {report['tensorflow']} in a process of its own without JAX "
            f"(tag 'serve', Session.run){'; ' + env_note if env_note else ''}{again}"
        )
        return load_arrays(out_file)


def _scratch() -> str | None:
    """Where a run's inputs and outputs (and a model converted without the cache) are written: under jaxparity's
    cache where it is on, the only place a serving process that outlives its command reads and writes
    (``serving.tf_savedmodel.serve_socket``); else the system's temporary directory."""
    from ..cache.store import enabled, root

    if not enabled():
        return None
    where = root() / "scratch"
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    return str(where)
