"""``savedmodel-c``: the ``savedmodel`` path's SavedModel, served by a C program with no Python.

A C++ TensorFlow Serving deployment loads the SavedModel with the ``serve`` tag and runs it through
TensorFlow's C/C++ runtime; no Python is involved. This path does the same with a small C program
(``serving/tf_c_serve.c``) built at first use with the system compiler against the installed
TensorFlow wheel's own C API (``include/tensorflow/c/c_api.h``, ``libtensorflow_cc.so.2``):
``TF_LoadSessionFromSavedModel`` then ``TF_SessionRun``.

The binary is cached in ``$XDG_CACHE_HOME/jaxparity/bin`` (default ``~/.cache/jaxparity/bin``)
under a name that hashes the source, the TensorFlow version and directory and the build command, so
it is built once per TensorFlow install. Tensors cross the process boundary as raw bytes with a
text manifest (tensor name, ``TF_DataType`` number, dims, file), so every dtype of fixed size,
bfloat16 included, crosses bit-exactly. Options in capitals set the serving process's environment
(``savedmodel-c:XLA_FLAGS=--xla_allow_excess_precision=false``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path as FsPath
from typing import Any, Callable

from .base import Path, PathError
from .savedmodel import SavedModelPath, _missing, _tail

_SOURCE = FsPath(__file__).resolve().parents[1] / "serving" / "tf_c_serve.c"
_LIBS = ("libtensorflow_cc.so.2", "libtensorflow_framework.so.2")


def _tf_dir() -> FsPath | None:
    """The installed TensorFlow package's directory, found without importing TensorFlow."""
    if _missing("tensorflow"):
        return None
    spec = importlib.util.find_spec("tensorflow")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return FsPath(locations[0]) if locations else None


def _compiler() -> str | None:
    """``$CC`` when set, else the first of gcc, cc, clang on PATH."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"])
    return next((found for cc in ("gcc", "cc", "clang") if (found := shutil.which(cc))), None)


def _cache_dir() -> FsPath:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return FsPath(base) / "jaxparity" / "bin"


def _tf_version(tf_dir: FsPath) -> str:
    """The wheel's version from its metadata (no TensorFlow import), else from TensorFlow."""
    from importlib import metadata

    for dist in ("tensorflow-cpu", "tensorflow", "tf-nightly", "tensorflow-intel"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    import tensorflow as tf

    return tf.__version__


def build_command(compiler: str, tf_dir: FsPath, output: str) -> list[str]:
    """How ``tf_c_serve.c`` is compiled and linked against the wheel's C API."""
    command = [compiler, "-O2", "-std=c11", f"-I{tf_dir / 'include'}", str(_SOURCE), "-o", output,
               f"-L{tf_dir}", *(f"-l:{lib}" for lib in _LIBS), f"-Wl,-rpath,{tf_dir}"]
    if shutil.which("ld.gold"):  # links against the 800 MB libtensorflow_cc.so.2 in 2 s instead of 12 s
        command.insert(1, "-fuse-ld=gold")
    return command


def server_binary() -> tuple[FsPath, float | None]:
    """The serving program for this TensorFlow, built now if it is not cached: (path, build seconds
    or None when it was cached). Raises PathError with the compiler's own words when the build fails."""
    tf_dir, compiler = _tf_dir(), _compiler()
    if tf_dir is None or compiler is None:
        raise PathError(SavedModelCPath().unavailable_reason() or "cannot build the serving program")
    key = hashlib.sha256()
    key.update(_SOURCE.read_bytes())
    key.update(f"\0{_tf_version(tf_dir)}\0{tf_dir}\0".encode())
    key.update("\0".join(build_command(compiler, tf_dir, "OUT")).encode())
    binary = _cache_dir() / f"tf_c_serve-{key.hexdigest()[:16]}"
    if os.access(binary, os.X_OK):
        return binary, None
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = f"{binary}.tmp-{os.getpid()}"  # built under a private name, renamed when complete
    start = time.perf_counter()
    try:
        proc = subprocess.run(build_command(compiler, tf_dir, partial), capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        raise PathError(f"building the C serving program with {compiler} took over 600 s") from e
    if proc.returncode != 0:
        try:
            os.unlink(partial)
        except FileNotFoundError:
            pass
        errors = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        raise PathError(
            f"building the C serving program with {compiler} against {tf_dir} failed:\n" + "\n".join(errors[-8:])
        )
    os.replace(partial, binary)
    return binary, time.perf_counter() - start


def _signature(model_dir: str) -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
    """The ``serving_default`` signature of the ``serve`` graph: ``{input key: (tensor, dtype enum)}``
    and ``{output key: tensor}``, read from saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(model_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graphs = [g for g in saved.meta_graphs if "serve" in g.meta_info_def.tags]
    if not graphs or "serving_default" not in graphs[0].signature_def:
        raise PathError(f"{model_dir} has no 'serving_default' signature under the tag 'serve'")
    sig = graphs[0].signature_def["serving_default"]
    return {k: (v.name, int(v.dtype)) for k, v in sig.inputs.items()}, {k: v.name for k, v in sig.outputs.items()}


def _numpy_dtype(enum: int) -> Any:
    """TensorFlow's own mapping from a ``TF_DataType`` number to numpy (bfloat16 via ml_dtypes)."""
    import tensorflow as tf

    return tf.dtypes.as_dtype(enum).as_numpy_dtype


def _enum(dtype: Any) -> int:
    import tensorflow as tf

    return tf.dtypes.as_dtype(dtype).as_datatype_enum


class SavedModelCPath(Path):
    name = "savedmodel-c"
    summary = "the jax2tf SavedModel, loaded and run by a C program through TensorFlow's C API (no Python)"
    capabilities = frozenset({"takes_xla_options", "another_xla_build"})
    xla_option_kind = "serving flag"
    heavy = True
    cost = 2.5  # jax2tf, then XLA in the C program's TensorFlow
    distributions = ("tensorflow-cpu", "tensorflow")
    options_help = {
        "ENV": "an environment variable of the serving process, e.g. XLA_FLAGS=--xla_allow_excess_precision=false",
        "keep": "a directory to keep the SavedModel in (default: a temporary one)",
    }

    def check_options(self) -> None:
        """A misspelled flag in the serving process's ``XLA_FLAGS``: a usage error with the nearest names."""
        from .xla import check_xla_flags

        if self.options.get("XLA_FLAGS"):
            check_xla_flags(self.spec, self.options["XLA_FLAGS"])

    def unavailable_reason(self) -> str | None:
        if not sys.platform.startswith("linux"):
            return f"the C serving program is built for Linux only (this is {sys.platform})"
        tf_dir = _tf_dir()
        if tf_dir is None:
            return "TensorFlow is not installed: pip install 'jaxparity[tensorflow]' (tensorflow-cpu)"
        wanted = [tf_dir / "include" / "tensorflow" / "c" / "c_api.h", *(tf_dir / lib for lib in _LIBS)]
        absent = [str(p.relative_to(tf_dir)) for p in wanted if not p.exists()]
        if absent:
            return f"the TensorFlow wheel in {tf_dir} lacks its C API ({', '.join(absent)})"
        if _compiler() is None:
            return "no C compiler to build the serving program: install gcc (or set CC)"
        return None

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        from ..pytree import host

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)  # Python scalars get JAX's dtypes
        binary, built = server_binary()
        with tempfile.TemporaryDirectory(prefix="jaxparity-savedmodel-c-") as tmp:
            # the very SavedModel the savedmodel path serves (converted once for both: the cache)
            saver = SavedModelPath({"keep": self.options["keep"]} if self.options.get("keep") else {})
            model_dir, out_tree = saver._saved(fn, args, tmp)
            self.notes.extend(saver.notes)
            inputs = {f"input_{i}": host(x) for i, x in enumerate(jax.tree_util.tree_leaves(args))}
            work = os.path.join(tmp, "io")
            os.mkdir(work)
            outputs, version = self._serve(binary, model_dir, inputs, work, timeout)
        flat = [outputs[f"output_{i}"] for i in range(out_tree.num_leaves)]
        env_note = ", ".join(f"{k}={v}" for k, v in self.options.items() if k.isupper())
        self.notes.append(
            f"served by a C program against TensorFlow {version}'s C API, no Python "
            f"(TF_LoadSessionFromSavedModel with tag 'serve', TF_SessionRun){'; ' + env_note if env_note else ''}"
        )
        self.notes.append(f"serving binary {binary}" + (f" (built now, {built:.1f} s)" if built is not None else ""))
        return jax.tree_util.tree_unflatten(out_tree, flat)

    def _serve(self, binary: FsPath, model_dir: str, inputs: dict, work: str, timeout: float | None) -> tuple:
        import numpy as np

        sig_inputs, sig_outputs = _signature(model_dir)
        missing = sorted(set(sig_inputs) - set(inputs))
        if missing:
            raise PathError(f"the signature's inputs {missing} were not provided")
        lines = []
        for i, (key, (tensor, enum)) in enumerate(sorted(sig_inputs.items())):
            array = np.asarray(inputs[key])
            if _enum(array.dtype) != enum:
                raise PathError(f"signature input {key} takes {_numpy_dtype(enum).__name__}, got {array.dtype}")
            with open(os.path.join(work, f"in_{i}.bin"), "wb") as f:
                f.write(array.tobytes(order="C"))  # raw, row-major, native byte order, as TF_Tensor holds it
            lines.append(" ".join(["feed", tensor, str(enum), str(array.ndim), *map(str, array.shape), f"in_{i}.bin"]))
        keys = sorted(sig_outputs)
        lines += [f"fetch {sig_outputs[k]}" for k in keys]
        with open(os.path.join(work, "inputs.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")

        env = dict(os.environ)
        env.update({k: v for k, v in self.options.items() if k.isupper()})
        try:
            proc = subprocess.run([str(binary), model_dir, work], env=env, capture_output=True, text=True,
                                  errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise PathError(f"the C serving process did not answer within {timeout:g} s") from e
        if proc.returncode != 0:
            how = (
                f"was killed by {signal.Signals(-proc.returncode).name}"
                if proc.returncode < 0
                else f"exited with status {proc.returncode}"
            )
            # The program's own last words (TensorFlow's message, first line) when it gave up; else the
            # last lines TensorFlow logged before it aborted (an unknown XLA flag is a LOG(FATAL)).
            ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("tf_c_serve: ")]
            raise PathError(f"the C serving process {how}:\n{ours[-1] if ours else _tail(proc.stderr + proc.stdout)}")

        outputs = {}
        with open(os.path.join(work, "outputs.txt")) as f:
            for line in f:
                k, code, ndim, *rest = line.split()
                shape, file = tuple(int(d) for d in rest[: int(ndim)]), rest[int(ndim)]
                raw = np.fromfile(os.path.join(work, file), dtype=np.uint8)
                outputs[keys[int(k)]] = raw.view(_numpy_dtype(int(code))).reshape(shape)
        version = next((ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("tensorflow ")), "?")
        return outputs, version
