"""Values, primitives and their parameters written as Python source a maintainer can run.

Arrays are written by their bit patterns (``np.array([0x3f80, 0xbf8c], np.uint16).view(jax.numpy.bfloat16)``),
so every value -- bf16, subnormals, NaN payloads, -0.0 -- comes back exactly; a comment beside them
shows the numbers. A primitive is written as JAX binds it (``jax.lax.log_p.bind(x0, accuracy=None)``):
the op the program ran, with no user code around it. Every written parameter is read back and compared with
the original before it is used, so what the script runs is what the program ran.
"""

from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["NotWritable", "array_source", "literal_source", "params_source", "primitive_source"]


class NotWritable(ValueError):
    """A value or parameter that has no faithful Python source (a sub-program, a sharding...)."""


def _namespace() -> dict[str, Any]:
    import jax.extend.core.primitives as primitives

    return {"np": np, "jax": jax, "primitives": primitives}


def primitive_source(name: str) -> str:
    """``jax.lax.add_p`` where jax.lax exports the primitive, else ``primitives.<name>_p``
    (``jax.extend.core.primitives``)."""
    import jax.extend.core.primitives as primitives

    if hasattr(lax, f"{name}_p"):
        return f"jax.lax.{name}_p"
    if hasattr(primitives, f"{name}_p"):
        return f"primitives.{name}_p"
    raise NotWritable(f"primitive {name!r} is exported by neither jax.lax nor jax.extend.core.primitives")


def _param(value: Any) -> str:
    if isinstance(value, enum.Enum):  # before int: lax.RoundingMethod is an IntEnum
        owner = type(value).__name__
        if getattr(lax, owner, None) is type(value):
            return f"jax.lax.{owner}.{value.name}"
        raise NotWritable(f"enum {owner} is not in jax.lax")
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if np.isfinite(value) else f"float({str(value)!r})"
    name = getattr(value, "__name__", "")
    if isinstance(value, type) and getattr(jnp, name, None) is value:  # jnp.float32, as the program has it
        return f"jax.numpy.{name}"
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return f"jax.numpy.dtype({np.dtype(value).name!r})"
    if isinstance(value, enum.Enum):
        owner = type(value).__name__
        if getattr(lax, owner, None) is type(value):
            return f"jax.lax.{owner}.{value.name}"
        raise NotWritable(f"enum {owner} is not in jax.lax")
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # NamedTuple: ConvDimensionNumbers...
        owner = type(value).__name__
        if getattr(lax, owner, None) is not type(value):
            raise NotWritable(f"{owner} is not in jax.lax")
        return f"jax.lax.{owner}(" + ", ".join(f"{k}={_param(getattr(value, k))}" for k in value._fields) + ")"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_param(v) for v in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, np.generic):
        return _param(value.item())
    raise NotWritable(f"a parameter of type {type(value).__name__}")


def params_source(params: dict[str, Any], overrides: dict[str, str] | None = None) -> str:
    """``k=v, ...`` for a primitive's parameters, checked to read back equal; ``overrides`` replace
    some by source expressions (``{"num_keys": "2 if FIXED else 1"}``)."""
    parts, ns = [], _namespace()
    for key, value in params.items():
        if overrides and key in overrides:
            parts.append(f"{key}={overrides[key]}")
            continue
        try:
            text = _param(value)
        except NotWritable as e:
            raise NotWritable(f"parameter {key!r}: {e}") from None
        back = eval(text, ns)  # noqa: S307 - our own text, checked to round-trip
        same = back == value if not isinstance(value, np.dtype) else np.dtype(back) == value
        if not same:
            raise NotWritable(f"parameter {key!r}={value!r} does not read back from {text!r}")
        parts.append(f"{key}={text}")
    return ", ".join(parts)


def _numbers(a: np.ndarray, limit: int = 8) -> str:
    flat = a.reshape(-1)
    if a.dtype.kind in "f" or a.dtype.name in ("bfloat16",) or a.dtype.kind == "V":
        shown = [repr(float(x)) for x in flat[:limit].astype(np.float64)]
    else:
        shown = [repr(x.item()) for x in flat[:limit]]
    more = f", ... ({flat.size} values)" if flat.size > limit else ""
    return "[" + ", ".join(shown) + more + "]"


def is_float(dtype: np.dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating)


def _dtype_source(dtype: np.dtype) -> str:
    return f"np.{dtype.name}" if dtype.name in np.sctypeDict and dtype.kind != "V" else f"jax.numpy.{dtype.name}"


def _bits(a: np.ndarray) -> tuple[str, str]:
    """(the words as hex literals, the unsigned dtype holding them)."""
    width = a.dtype.itemsize * 2
    words = ", ".join(f"0x{int(w):0{width}x}" for w in a.reshape(-1).view(f"uint{8 * a.dtype.itemsize}"))
    return words, f"np.uint{8 * a.dtype.itemsize}"


def array_source(a: np.ndarray) -> str:
    """Exact source for ``a``: bit patterns for floats, integers and booleans as written."""
    a = np.asarray(a)
    shape = tuple(int(s) for s in a.shape)
    reshape = "" if len(shape) == 1 else ".reshape(())" if not shape else f".reshape({', '.join(map(str, shape))})"
    if is_float(a.dtype):
        words, holder = _bits(a)
        return f"np.array([{words}], {holder}).view({_dtype_source(a.dtype)}){reshape}  # {_numbers(a)}"
    if a.dtype == np.bool_:
        return f"np.array({a.reshape(-1).tolist()!r}, np.bool_){reshape}"
    return f"np.array({a.reshape(-1).tolist()!r}, np.{a.dtype.name}){reshape}"


def literal_source(value: Any, dtype: Any) -> str:
    """A literal operand of an op (a scalar the program baked in), with its dtype."""
    a = np.asarray(value, dtype=np.dtype(dtype))
    if is_float(a.dtype):
        words, holder = _bits(a.reshape(1))
        return f"{holder}({words}).view({_dtype_source(a.dtype)})"
    return f"np.{a.dtype.name}({a.item()!r})" if a.dtype != np.bool_ else f"np.bool_({bool(a)})"
