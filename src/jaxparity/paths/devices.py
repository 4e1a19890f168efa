"""The device a path of this process computes on: ``jit:device=cpu``, ``eager:device=tpu``, ``export:device=cpu``.

Without the option a path runs where JAX puts it (its default backend: the accelerator where there is one).
With it, the inputs are placed on that platform's first device and the path runs under
``jax.default_device`` there, so JAX compiles and runs every op on it; one process then holds the chip
and still computes on the host beside it, which is how a model trained on a TPU is compared with the CPU
that serves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

from .base import PathUnavailable

__all__ = ["DEVICE_HELP", "backend", "device_of", "host_twin", "on_device", "placed_on"]

DEVICE_HELP = ("cpu, tpu or gpu: run on that platform's first device of this process (default: JAX's default "
               "backend, the accelerator where there is one)")


def backend() -> str:
    """JAX's default platform in this process ("cpu", "tpu", "gpu")."""
    import jax

    return jax.default_backend()


def device_of(options: Mapping[str, str]) -> str:
    """The platform a path with ``options`` computes on."""
    return options.get("device") or backend()


def _device(platform: str) -> Any:
    import jax

    try:
        devices = jax.devices(platform)
    except RuntimeError as e:
        have = sorted({d.platform for d in jax.devices()} | {"cpu"})
        raise PathUnavailable(f"device={platform}: this process has no {platform} device (it has "
                              f"{', '.join(have)}): {str(e).splitlines()[0]}") from None
    return devices[0]


def on_device(options: Mapping[str, str]) -> Any:
    """A context that makes the path's device JAX's default device (nothing where no device is set)."""
    import jax

    return jax.default_device(_device(options["device"])) if options.get("device") else nullcontext()


def placed_on(options: Mapping[str, str], args: Any, arrays_only: bool = False) -> Any:
    """``args`` with every array leaf on the path's device; without a device option, numpy arrays become JAX
    arrays on the default device when ``arrays_only`` (op by op, a numpy input would otherwise be computed by
    numpy: ``a @ b`` of two numpy arrays is numpy's matmul, not JAX's), else ``args`` as they are."""
    import jax
    import numpy as np

    if options.get("device"):
        dev = _device(options["device"])
        return jax.tree_util.tree_map(lambda x: jax.device_put(x, dev) if isinstance(x, (np.ndarray, jax.Array))
                                      else x, args)
    if arrays_only:
        return jax.tree_util.tree_map(lambda x: jax.device_put(x) if isinstance(x, np.ndarray) else x, args)
    return args



def host_twin(baseline: Any) -> str:
    """The run a default comparison on an accelerator adds on the host, for the ``baseline`` path: the baseline
    compiled there, its options kept, where its path is jax.jit's own and takes a device (``jit:...`` ->
    ``jit:...,device=cpu``); else ``jit:device=cpu``, which ``explain.pairs.counterpart`` pairs with jit on the
    accelerator (like against like). Compiled, not op by op: its per-op values are captured from one program, as
    the device's are."""
    if baseline.env or "device" not in baseline.options_help or "compiled_in_process" not in baseline.capabilities:
        return "jit:device=cpu"
    return baseline.with_option("device", "cpu").spec
