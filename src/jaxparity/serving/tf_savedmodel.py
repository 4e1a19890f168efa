"""Serve a SavedModel the way TensorFlow Serving's SavedModelBundle does, in a fresh process.

Run as a script: ``python tf_savedmodel.py MODEL_DIR INPUTS.npz OUTPUTS.npz``, or started early as
``python tf_savedmodel.py --wait`` (it imports TensorFlow while the caller converts the model, then
reads ``MODEL_DIR<TAB>INPUTS<TAB>OUTPUTS`` from stdin), or kept warm as ``python tf_savedmodel.py
--serve``: one request per stdin line, each answered by one ``@@jaxparity {...}`` line on stdout (the
report, or ``{"error": ...}``), each model loaded into a graph and session of its own and kept loaded
for the next request (the last 4), as TensorFlow Serving holds many models in one process; it leaves
when stdin closes. ``--serve --socket PATH --idle SECONDS`` serves the same requests on a Unix socket
and outlives the command that started it (``serve_socket``). It imports
TensorFlow and not JAX, loads the model with the ``serve`` tag through the TF1 SavedModel loader,
feeds the ``serving_default`` signature's input tensors and fetches its outputs with
``Session.run``. Environment variables (``XLA_FLAGS``...) are the caller's to set: TensorFlow reads
``XLA_FLAGS`` once, at its first XLA compile in this process.
Prints one JSON line describing the process (versions, and that JAX was never imported).
"""

import importlib.abc
import json
import sys
from pathlib import Path
from typing import Any


class _NoJax(importlib.abc.MetaPathFinder):
    """TensorFlow imports JAX when it is installed (for its TFLite converter); a TensorFlow
    Serving process has no JAX, so this one behaves as if JAX were not installed."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name.partition(".")[0] in ("jax", "jaxlib", "flax"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked in the serving process)", name=name)
        return None


sys.meta_path.insert(0, _NoJax())

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the directory holding jaxparity

from jaxparity.arrayio import load_arrays, save_arrays  # noqa: E402  (numpy-only module)


# Models loaded by a process that serves many requests, as TensorFlow Serving keeps a model loaded
# between requests: (the model directory, what its files are now) -> (session, signature), the one
# used longest ago closed first. A directory whose files changed (``keep=DIR`` written again) is
# another model.
_LOADED: dict = {}
_KEEP_LOADED = 0  # how many; 0 in a process that serves one request


def _identity(model_dir: str) -> tuple:
    root = Path(model_dir)
    files = [root / "saved_model.pb", *sorted((root / "variables").glob("*"))]
    return (str(root.resolve()),) + tuple((f.name, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
                                          for f in files if f.is_file() and (st := f.stat()))


def _load(model_dir: str) -> tuple:
    """(session, signature, loaded before): the model's own graph and session, loaded now or kept."""
    import tensorflow as tf

    key = _identity(model_dir) if _KEEP_LOADED else None
    if key in _LOADED:
        _LOADED[key] = _LOADED.pop(key)  # the most recently used: last
        return (*_LOADED[key], True)
    session = tf.compat.v1.Session(graph=tf.Graph())
    try:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], model_dir)
    except BaseException:
        session.close()
        raise
    signature = meta.signature_def["serving_default"]
    if key is not None:
        _LOADED[key] = (session, signature)
        while len(_LOADED) > _KEEP_LOADED:
            _LOADED.pop(next(iter(_LOADED)))[0].close()
    return session, signature, False


def main(model_dir: str, inputs_file: str, outputs_file: str) -> None:
    import tensorflow as tf

    inputs = load_arrays(inputs_file)
    session, signature, before = _load(model_dir)
    try:
        missing = sorted(set(signature.inputs) - set(inputs))
        if missing:
            raise SystemExit(f"the signature's inputs {missing} were not provided")
        feeds = {signature.inputs[k].name: inputs[k] for k in signature.inputs}
        fetches = {k: signature.outputs[k].name for k in signature.outputs}
        outputs = session.run(fetches, feed_dict=feeds)
    finally:
        if not _KEEP_LOADED:
            session.close()
    save_arrays(outputs_file, outputs)
    print(
        json.dumps(
            {
                "tensorflow": tf.__version__,
                "jax_imported": "jax" in sys.modules,
                "signature_inputs": {k: v.name for k, v in signature.inputs.items()},
                "signature_outputs": {k: v.name for k, v in signature.outputs.items()},
                "loaded_before": before,
            }
        )
    )


def _answer(line: str, root: str | None = None) -> dict:
    """The report of one request line, or ``{"error": ...}``: a request's failure is told, never raised.
    ``root``: every file the request names (the model, the inputs, the outputs) must lie under it (the cache of
    the command that started this process); one that does not is refused, unread and unwritten."""
    import contextlib
    import io
    import traceback

    said = io.StringIO()
    try:
        files = line.split("\t")[:3]
        if root is not None:
            outside = [f for f in files if not _under(f, root)]
            if outside:
                return {"error": f"refused: {', '.join(outside)} outside {root}, the only place this process serves"}
        with contextlib.redirect_stdout(said):
            main(*files)
        return json.loads(said.getvalue().strip().splitlines()[-1])
    except BaseException as e:  # noqa: BLE001 - the request's failure, told to the caller; serve the next
        return {"error": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]}


def serve() -> None:
    global _KEEP_LOADED
    import tensorflow  # noqa: F401

    _KEEP_LOADED = 4

    for line in sys.stdin:
        line = line.rstrip("\n")
        if line:
            print("@@jaxparity " + json.dumps(_answer(line)), flush=True)


def _under(path: str, root: str) -> bool:
    import os

    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top + os.sep)


def private(directory: str) -> str | None:
    """Why ``directory`` is no place for a serving socket (another user owns it, or may enter it), or None."""
    import os
    import stat

    st = os.stat(directory)
    if st.st_uid != os.getuid():
        return f"{directory} is owned by uid {st.st_uid}, not this process's {os.getuid()}"
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        return f"{directory} is open to other users (mode {stat.S_IMODE(st.st_mode):o}; it must be 700)"
    return None


def _same_user(conn: Any) -> bool:
    """The process at the other end of ``conn`` runs as this process's user (``SO_PEERCRED``)."""
    import os
    import socket
    import struct

    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except (OSError, AttributeError):
        return False
    return uid == os.getuid()


def serve_socket(path: str, idle: float, root: str | None = None) -> None:
    """``--serve`` on a Unix socket that outlives the command which started it (``execution.warm``):
    one connection per request, told first this process's pid and how many requests it served. It
    leaves after ``idle`` seconds without a request, when its socket is removed or replaced, and before
    answering once a package of its interpreter was installed, removed or upgraded (``{"stale": ...}``).

    Nothing another user can steer: it serves only in a directory of its own user's that no other may enter
    (700), answers only connections from its own user (``SO_PEERCRED``), and reads and writes only files under
    ``root``, the cache of the command that started it."""
    import os
    import socket
    import time

    why = private(os.path.dirname(path) or ".")
    if why is not None:
        raise SystemExit(f"not serving on {path}: {why}")

    global _KEEP_LOADED
    import tensorflow  # noqa: F401

    _KEEP_LOADED = 4

    def installed() -> tuple:  # pip changes a site-packages directory whenever it adds or removes a package
        return tuple(os.stat(p).st_mtime_ns if os.path.isdir(p) else 0 for p in sys.path if p)

    packages = installed()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    scratch = os.path.join(os.path.dirname(path), f"{os.getpid()}.bind")  # no longer than path
    listener.bind(scratch)
    listener.listen(8)
    os.replace(scratch, path)  # appears whole, ready to accept
    mine = os.stat(path).st_ino

    def still_mine() -> bool:
        try:
            return os.stat(path).st_ino == mine
        except OSError:
            return False

    served, last = 0, time.monotonic()
    listener.settimeout(1.0)
    try:
        while still_mine():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                if time.monotonic() - last > idle:
                    break
                continue
            if not _same_user(conn):
                conn.close()  # another user's connection: nothing read, nothing said
                continue
            with conn, conn.makefile("rw") as stream:
                stream.write("@@jaxparity " + json.dumps({"pid": os.getpid(), "served": served}) + "\n")
                stream.flush()
                line = stream.readline().rstrip("\n")
                if not line:
                    continue
                if installed() != packages:
                    stream.write("@@jaxparity " + json.dumps({"stale": "a package of this interpreter changed "
                                                              "since it imported TensorFlow"}) + "\n")
                    break
                answer = _answer(line, root)
                served += 1
                stream.write("@@jaxparity " + json.dumps(answer) + "\n")
            last = time.monotonic()
    finally:
        if still_mine():
            os.unlink(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"] and sys.argv[2:3] == ["--socket"]:
        serve_socket(sys.argv[3], float(sys.argv[5]), sys.argv[7] if sys.argv[6:7] == ["--root"] else None)
    elif sys.argv[1:2] == ["--serve"]:
        serve()
    elif sys.argv[1:2] == ["--wait"]:
        # Started before the model exists: import TensorFlow now (seconds), then read
        # "MODEL_DIR<TAB>INPUTS<TAB>OUTPUTS" from stdin once the caller has saved it.
        import tensorflow  # noqa: F401

        line = sys.stdin.readline().rstrip("\n")
        if not line:
            raise SystemExit(0)  # the caller gave up (the model could not be saved)
        main(*line.split("\t")[:3])
    else:
        main(*sys.argv[1:4])
