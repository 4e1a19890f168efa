"""IREE per dispatch, counted: for each model, its dispatches read from IREE's own IR, the values each stores
captured from IREE's own run, and each dispatch run on its own captured inputs (as declared, then in the
formulations a compiler may choose). Prints, per model: whether the capture left IREE's outputs unchanged, how
many dispatches store other values than the declared ops give, how many of those a formulation reproduces bit
for bit, and the seconds it took.

    python benchmarks/iree_dispatches.py [FILE[:FN] ...]   (default: the bf16 examples and a Hugging Face GPT-2)
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["examples/conv_bf16.py", "examples/mlp_bf16.py", "examples/cnn_bf16.py", "examples/transformer_bf16.py",
           "examples/resnet_bf16.py", "benchmarks/models/hf_gpt2.py"]


def main(specs: list[str]) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxparity.case import load_case
    from jaxparity.explain.mechanism.artifact.dispatches import dispatch_findings
    from jaxparity.localize.program import flatten
    from jaxparity.paths.iree import IreePath

    print(f"{'model':<36} {'ops':>5} {'dispatches':>10} {'differ':>6} {'reproduced':>10}  {'by':<40} {'s':>6}")
    for spec in specs:
        t = time.perf_counter()
        try:
            case = load_case(str(ROOT / spec) if ":" not in spec else spec)
            args = jax.tree_util.tree_map(jnp.asarray, case.args)
            program, flat = flatten(case.fn, args), jax.tree_util.tree_leaves(args)
            path = IreePath()
            plain = [np.asarray(x) for x in jax.tree_util.tree_leaves(path.run(case.fn, args))]
            found, how = dispatch_findings(path, program, flat, plain)
        except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end
            print(f"{spec:<36} failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
            continue
        if not found:
            print(f"{spec:<36} {len(program.ops):>5} no view: {how}")
            continue
        differ = [f for f in found if f.differ]
        by = Counter((f.reproduced_by or "none").split(":")[0] for f in differ)
        print(f"{Path(spec).name:<36} {len(program.ops):>5} {len(found):>10} {len(differ):>6} "
              f"{sum(f.reproduced_by is not None for f in differ):>10}  {dict(by)!s:<40} {time.perf_counter() - t:>6.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
