"""Deserialize a ``jax.export`` artifact and call it, in another environment's JAX.

Run as a script: ``python jax_export_load.py ARTIFACT INPUTS.npz OUTPUTS.npz``. Inputs are the
flattened argument leaves ``input_0..``; outputs the flattened results ``output_0..``. Prints one JSON
line with the JAX version that loaded it. What fails here is what a serving process of that JAX
version would fail on: the test of artifact compatibility.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the directory holding jaxparity

from jaxparity.arrayio import load_arrays, save_arrays  # noqa: E402  (numpy-only module)


def main(artifact: str, inputs_file: str, outputs_file: str) -> None:
    import jax
    from jax import export

    exported = export.deserialize(bytearray(Path(artifact).read_bytes()))
    arrays = load_arrays(inputs_file)
    leaves = [arrays[f"input_{i}"] for i in range(len(arrays))]
    args, kwargs = jax.tree_util.tree_unflatten(exported.in_tree, leaves)
    outputs = jax.tree_util.tree_leaves(exported.call(*args, **kwargs))
    save_arrays(outputs_file, {f"output_{i}": jax.device_get(x) for i, x in enumerate(outputs)})
    print(json.dumps({"jax": jax.__version__}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
