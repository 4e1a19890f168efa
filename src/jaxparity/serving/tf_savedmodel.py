"""Serve a SavedModel the way TensorFlow Serving's SavedModelBundle does, in a fresh process.

Run as a script: ``python tf_savedmodel.py MODEL_DIR INPUTS.npz OUTPUTS.npz``, or started early as
``python tf_savedmodel.py --wait`` (it imports TensorFlow while the caller converts the model, then
reads ``MODEL_DIR<TAB>INPUTS<TAB>OUTPUTS`` from stdin), or kept warm as ``python tf_savedmodel.py
--serve``: one request per stdin line, each answered by one ``@@jaxparity {...}`` line on stdout (the
report, or ``{"error": ...}``), each model loaded into a graph and session of its own, as TensorFlow
Serving holds many models in one process; it leaves when stdin closes. It imports
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


def main(model_dir: str, inputs_file: str, outputs_file: str) -> None:
    import tensorflow as tf

    inputs = load_arrays(inputs_file)
    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], model_dir)
        signature = meta.signature_def["serving_default"]
        missing = sorted(set(signature.inputs) - set(inputs))
        if missing:
            raise SystemExit(f"the signature's inputs {missing} were not provided")
        feeds = {signature.inputs[k].name: inputs[k] for k in signature.inputs}
        fetches = {k: signature.outputs[k].name for k in signature.outputs}
        outputs = session.run(fetches, feed_dict=feeds)
    save_arrays(outputs_file, outputs)
    print(
        json.dumps(
            {
                "tensorflow": tf.__version__,
                "jax_imported": "jax" in sys.modules,
                "signature_inputs": {k: v.name for k, v in signature.inputs.items()},
                "signature_outputs": {k: v.name for k, v in signature.outputs.items()},
            }
        )
    )


def serve() -> None:
    import contextlib
    import io
    import traceback

    import tensorflow  # noqa: F401

    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line:
            continue
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said):
                main(*line.split("\t")[:3])
            answer = json.loads(said.getvalue().strip().splitlines()[-1])
        except BaseException as e:  # noqa: BLE001 - the request's failure, told to the caller; serve the next
            answer = {"error": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]}
        print("@@jaxparity " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
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
