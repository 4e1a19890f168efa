"""What running a path gives back (``PathRun``), and what the comparison records about the case it ran
on (``CaseInfo``: its inputs, and the versions and CPU features that decide its numbers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..equivalence.rules import OutputRule
from ..result import ArrayInfo, Fault, HostCallback, IdealUncertainty

__all__ = ["CaseInfo", "PathRun", "Status", "case_info", "environment"]

Status = Literal["ok", "error", "unavailable", "timeout", "crashed"]



@dataclass(frozen=True)
class PathRun:
    """What running one path produced: named output arrays, or why there are none."""

    spec: str
    status: Status
    outputs: tuple[tuple[str, np.ndarray], ...] | None = None
    seconds: float = 0.0
    message: str | None = None
    notes: tuple[str, ...] = ()
    # Outputs whose values are defined only up to sign, phase or order (eigenvectors...), by leaf name:
    # read from the function's trace after a path that traces it ran (see ``run_in_process``).
    output_rules: dict[str, OutputRule] = field(default_factory=dict)
    device: str | None = None  # the platform it computed on ("cpu", "tpu", "gpu"; ``Path.device``)
    callbacks: tuple[HostCallback, ...] = ()  # the program's host callbacks, where they are why it failed
    ideal_uncertainty: IdealUncertainty | None = None  # the f64 path: its constants rounded at trace time
    fault: Fault | None = None  # a failure that is not the runtime's: whose it is (``PathError.fault``)


@dataclass(frozen=True)
class CaseInfo:
    name: str
    source: str | None
    input_source: str
    inputs: tuple[ArrayInfo, ...]
    environment: dict[str, Any] = field(default_factory=dict)
    data: tuple[str, ...] | None = None  # the input leaves drawn sets vary (None: not known here)
    roles: tuple[str, ...] = ()  # "arg0 (the model's variables: an nnx.State)", one per argument
    replaced: tuple[str, ...] = ()  # inputs given another value than the case's own (``--inputs``)
    # Some float input holds more than one value: a constant output is then the model's doing, not the
    # example's (``jnp.ones(3)`` in, a constant out, is no sign of a degenerate model).
    varied_inputs: bool = True
    # The batch of the data: the leading size shared by the data leaves whose examples (rows along the
    # first axis) differ, where there is one: an output whose rows are then all the same shows nothing.
    batch: int | None = None

    def sampled(self, drawn: list[str] | None = None) -> str:
        """What drawn input sets vary (``drawn``: the leaves they replace) and keep: 'varying arg1; kept: arg0
        (the model's variables: an nnx.State)'."""
        kept = [r for r in self.roles if "variables" in r]
        varied = ", ".join(drawn if drawn is not None else self.data or ()) or (
            "nothing: no data input can be drawn (every sample is the example's own inputs)")
        return f"varying {varied}" + (f"; kept: {'; '.join(kept)}" if kept else "")



def environment() -> dict[str, Any]:
    """Versions and CPU features that decide which numbers a path gives."""
    import platform
    from importlib import metadata

    versions = {}
    for dist in ("jax", "jaxlib", "flax", "numpy", "ml_dtypes", "tensorflow-cpu", "tensorflow"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    flags = sorted(have & {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16"})
                    break
    except OSError:
        pass
    import jax

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_features": flags,
        "devices": [str(d) for d in jax.devices()],
        "backend": jax.default_backend(),
        "packages": versions,
    }


def case_info(case: Any) -> CaseInfo:
    import jax

    from ..pytree import argument_leaves

    def info(name: str, x: Any) -> ArrayInfo:
        aval = jax.numpy.asarray(x) if not isinstance(x, (jax.Array, np.ndarray, np.generic)) else x
        return ArrayInfo(name, str(aval.dtype), tuple(int(d) for d in np.shape(aval)))

    return CaseInfo(
        name=case.name,
        source=case.source,
        input_source=case.input_source,
        inputs=tuple(info(n, x) for n, x in argument_leaves(case.args)),
        environment=environment(),
        data=tuple(sorted(case.data_leaves())) if hasattr(case, "data_leaves") else None,
        roles=tuple(f"{r.name} (the model's variables: {r.why})" if r.role == "variables"
                    else f"{r.name} (data: {r.why})" for r in getattr(case, "roles", ())),
        replaced=tuple(getattr(case, "replaced", ())),
        varied_inputs=_varied(case.args),
        batch=_batch(case),
    )


def _batch(case: Any) -> int | None:
    """The leading size of the case's data leaves whose rows differ, where they agree on one (> 1)."""
    from ..pytree import argument_leaves, host

    if not hasattr(case, "data_leaves"):
        return None
    data = set(case.data_leaves())
    sizes = set()
    for name, x in argument_leaves(case.args):
        a = host(x)
        if name not in data or a.ndim < 1 or a.shape[0] < 2 or not _numeric(a.dtype):  # bf16: kind 'V'
            continue
        rows = a.reshape(a.shape[0], -1)
        if not np.all(rows == rows[:1]):
            sizes.add(int(a.shape[0]))
    return sizes.pop() if len(sizes) == 1 else None


def _numeric(dtype: np.dtype) -> bool:
    from ..metrics import UnsupportedDtype, dtype_class

    try:
        return dtype_class(dtype) != "empty"
    except UnsupportedDtype:
        return False


def _varied(args: Any) -> bool:
    import jax

    from ..pytree import host
    from ..rounding import is_float_dtype

    for x in jax.tree_util.tree_leaves(args):
        a = host(x)
        if is_float_dtype(a.dtype) and a.size > 1:
            flat = a.reshape(-1).astype(np.float64)
            if not np.all(flat == flat[0]):
                return True
    return False

