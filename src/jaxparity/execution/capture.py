"""``jaxparity capture``: run one path of the case here, on this machine's device, and write the bundle
(``bundle``): inputs, outputs, every op's values, the device and the versions."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..arrayio import save_arrays
from ..bundle import META, Bundle

__all__ = ["write_bundle"]


def write_bundle(case: Any, spec: str, out: str | os.PathLike) -> Bundle:
    """Run ``case`` along path ``spec`` here, capturing every op's values, and write the bundle to ``out``."""
    import jax

    from ..localize.program import flatten
    from ..localize.values import op_values
    from ..paths import make_path
    from ..pytree import argument_leaves, host, named_leaves

    path = make_path(spec)
    program = flatten(case.fn, case.args)
    flat_args = jax.tree_util.tree_leaves(case.args)
    vals = op_values(program, spec, flat_args)
    outputs = named_leaves(jax.tree_util.tree_unflatten(program.out_tree, vals.outputs), "out")
    versions = {"jax": jax.__version__, "jaxlib": getattr(jax.lib, "__version__", "?")}
    device = path.device()
    primitives = [op.info.primitive for op in program.ops]
    # Each op as the host aligns it under its own JAX (``bundle.aligned_values``): its primitive, its outputs'
    # types, its line and the value ids its values are stored under.
    ops = [[op.info.primitive, list(op.info.outputs), op.info.user_source or op.info.source,
            [vid if vid in vals.values else None for vid in op.outputs]] for op in program.ops]
    meta = {"path": spec, "device": device, "versions": versions, "primitives": primitives, "ops": ops,
            "devices": [str(d) for d in jax.devices()]}
    arrays = {name: host(x) for name, x in argument_leaves(case.args)}
    arrays |= {name: np.asarray(x) for name, x in outputs}
    arrays |= {f"op/{vid}": np.asarray(v) for vid, v in vals.values.items()}
    arrays[META] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    save_arrays(out, arrays)
    return Bundle(spec, device, versions, tuple(primitives), dict(vals.values),
                  [np.asarray(x) for x in vals.outputs], tuple(_op_entry(o) for o in ops))


def _op_entry(op: list) -> tuple:
    return op[0], tuple(op[1]), op[2], tuple(op[3])
