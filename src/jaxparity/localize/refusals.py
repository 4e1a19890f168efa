"""Why a runtime may refuse a program, read from the program itself: the ops whose inputs leave their result
undefined for some runtimes (an integer x / 0, a gather out of bounds), found by running the program eagerly
once on the same inputs. A path that failed ("Integer division by zero", "indices element out of data
bounds") is reported with the op, the elements and the model-side change that makes them defined."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["converted_from", "kind_hint", "line_hint", "located_hint", "primitive_hint", "random_hint", "refusal_hint"]


_PRIMITIVES = ("div", "rem", "gather")  # where ``interpreter.variants.refusable`` looks


def refusal_hint(fn: Callable[..., Any], args: tuple, limit: int = 2,
                 primitives: tuple[str, ...] = _PRIMITIVES) -> str | None:
    """The program's ops that compute undefined elements on ``args`` ("#0 div (case.py:16) divides an integer
    by zero in 3 of 6 elements ...; mask the divisor ..."), or None (none, or the program does not run).
    ``primitives``: the ops looked at (of ``_PRIMITIVES``); the program runs only where it holds one."""
    import jax

    from ..interpreter.variants import refusable
    from .program import flatten

    try:
        program = flatten(fn, args)
        if not any(op.info.primitive in primitives and (op.info.primitive == "gather" or
                                                        str(op.info.outputs[0]).startswith(("int", "uint")))
                   for op in program.ops if op.info.outputs):
            return None
        found: list[str] = []

        def apply(op: Any, ins: list[Any]) -> Any:
            outs = op.eqn.primitive.bind(*ins, **op.eqn.params)
            outs = outs if op.eqn.primitive.multiple_results else [outs]
            if op.info.primitive in primitives and len(found) < limit:
                out = np.asarray(outs[0])
                said = refusable(op.info.primitive, dict(op.eqn.params), [np.asarray(x) for x in ins], out)
                if said is not None:
                    where = op.info.user_source or op.info.source or "the program"
                    n, what, fix = said
                    found.append(f"#{op.info.index} {op.info.primitive} ({where}) {what} in {n} of {out.size} "
                                 f"element{'s' if out.size != 1 else ''}; {fix}")
            return outs

        with jax.disable_jit():
            program.evaluate(jax.tree_util.tree_leaves(args), apply)
    except Exception:  # noqa: BLE001 - the hint is a courtesy: the path's own error stands without it
        return None
    return "; ".join(found) if found else None


def random_hint(fn: Callable[..., Any], args: tuple) -> str | None:
    """Where the program draws random numbers, for a runtime that refused it ("the program draws random
    numbers: #12 random_bits (model.py:30, in Dropout) ...; make it deterministic ..."), or None."""

    from .program import RANDOM_PRIMITIVES, flatten

    import jax

    from .. import jaxcompat

    try:
        live = _primitives(jaxcompat.dce_jaxpr(jax.make_jaxpr(fn)(*args).jaxpr)[0])
        if not live.intersection(RANDOM_PRIMITIVES):  # random ops whose values nothing uses (a key made and dropped)
            return None
        program = flatten(fn, args)
    except Exception:  # noqa: BLE001 - a courtesy, as above
        return None
    ops = [op for op in program.ops if op.info.primitive in RANDOM_PRIMITIVES]
    if not ops:
        return None
    first = ops[0]
    module = f", in {first.info.name_stack}" if first.info.name_stack else ""
    where = f"#{first.info.index} {first.info.primitive} ({first.info.user_source or first.info.source or '?'}{module})"
    if len(ops) > 1:
        where += f" and {len(ops) - 1} more random op{'s' if len(ops) > 2 else ''}"
    return (f"the program draws random numbers: {where}; converters into TFLite and ONNX have neither a "
            "key type nor the 32-bit unsigned shifts of JAX's threefry generator: make the model deterministic "
            "where it is served (Dropout(deterministic=True), model.eval()), or pass the random values in as an "
            "input")


# The JAX primitives a converter's op (TFLite's ``tfl.*``, TensorFlow's ``tf.*``, StableHLO's) comes from, where
# its name is not the primitive's own: what a legalization error names is matched to the program's op by it.
_CONVERTED_FROM = {
    "gather_nd": ("gather",), "gather": ("gather",), "scatter_nd": ("scatter", "scatter-add", "scatter_add"),
    "batch_matmul": ("dot_general",), "fully_connected": ("dot_general",), "dot_general": ("dot_general",),
    "conv_2d": ("conv_general_dilated",), "depthwise_conv_2d": ("conv_general_dilated",),
    "transpose_conv": ("conv_general_dilated",), "convolution": ("conv_general_dilated",),
    "not_equal": ("ne",), "equal": ("eq",), "less": ("lt",), "less_equal": ("le",), "greater": ("gt",),
    "greater_equal": ("ge",), "compare": ("eq", "ne", "lt", "le", "gt", "ge"), "logical_and": ("and",),
    "logical_or": ("or",), "logical_not": ("not",), "select": ("select_n",), "select_v2": ("select_n",),
    "cast": ("convert_element_type",), "convert": ("convert_element_type",), "logistic": ("logistic",),
    "maximum": ("max",), "minimum": ("min",), "squared_difference": ("sub", "integer_pow"),
    "max_pool_2d": ("reduce_window_max",), "average_pool_2d": ("reduce_window_sum",),
    "reduce_max": ("reduce_max",), "reduce_min": ("reduce_min",), "sum": ("reduce_sum",), "mean": ("reduce_sum",),
    "reduce_prod": ("reduce_prod",), "concatenation": ("concatenate",), "strided_slice": ("slice",),
    "pack": ("concatenate", "broadcast_in_dim"), "floor_div": ("div",), "floor_mod": ("rem",),
    "arg_max": ("argmax",), "arg_min": ("argmin",), "cumsum": ("cumsum",), "pow": ("pow",),
}


def converted_from(message: str) -> set[str]:
    """The JAX primitives the converter's ops named in ``message`` come from ("failed to legalize operation
    'tfl.gather_nd'" -> {"gather"}); empty where it names none."""
    import re

    found: set[str] = set()
    kinds = [*re.findall(r"\b(?:tfl|tf|stablehlo|mhlo|chlo)\.(\w+)", message),
             *(k.lower() for k in re.findall(r"\((?:STABLEHLO_)?([A-Z][A-Z0-9_]+)\)", message))]  # (STABLEHLO_SCATTER)
    for kind in kinds:
        kind = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", kind).lower()  # tf.GatherNd -> gather_nd
        found.update(_CONVERTED_FROM.get(kind, (kind,)))
    return found


def kind_hint(fn: Callable[..., Any], args: tuple, message: str) -> str | None:
    """The program's ops of the kind a runtime's error names by its own op ("Node number 3 (STABLEHLO_SCATTER)
    failed to prepare" -> the scatter-adds of a gradient), with the user's line and how the op came to be
    (``transpose(jvp(...))``: a gradient's): "#17 scatter-add at model.py:4, in transpose(jvp(loss)) (and 1
    more scatter-add)"; None where the message names no kind the program has."""
    from .program import flatten

    kinds = converted_from(message)
    if not kinds:
        return None
    try:
        program = flatten(fn, args)
    except Exception:  # noqa: BLE001 - a courtesy: never hide the runtime's own message
        return None
    ops = [op.info for op in program.ops if op.info.primitive in kinds or
           op.info.primitive.replace("-", "_") in kinds or op.info.primitive.split("-")[0] in kinds]
    if not ops:
        return None
    first = ops[0]
    module = f", in {first.name_stack}" if first.name_stack else ""
    more = f" (and {len(ops) - 1} more {', '.join(dict.fromkeys(o.primitive for o in ops[1:]))})" if len(ops) > 1 else ""
    return f"#{first.index} {first.primitive} at {first.user_source or first.source or '?'}{module}{more}"


def _named_lines(fn: Callable[..., Any], args: tuple, message: str) -> tuple[Any, Callable[[str | None], bool]] | None:
    """The program, and whether a source ("file.py:12") is a line the converter's ``message`` names; None where
    it names none, or the program cannot be traced (a courtesy: never hide the converter's own message)."""
    import re

    from .program import flatten

    named = {(os.path.basename(f), int(n)) for f, n in re.findall(r'([\w.-]+\.py)"?:(\d+)', message)}
    if not named:
        return None
    try:
        program = flatten(fn, args)
    except Exception:  # noqa: BLE001 - a courtesy
        return None

    def at(src: str | None) -> bool:
        file, _, line = (src or "").rpartition(":")
        return line.isdigit() and (os.path.basename(file), int(line)) in named

    return program, at


def located_hint(fn: Callable[..., Any], args: tuple, message: str) -> str | None:
    """The op of the program behind a converter's error, by the line and the op it names: at a library's line
    (``loc("flax/linen/attention.py":910:...)``), the op created there that the failing op comes from ("failed
    to legalize operation 'tfl.gather_nd'": the gather, not the comparison jnp.take's index fix-up makes at
    the same line) with the user's own line, as "#41 ne at models.py:123, in TransformerLM/.../
    MultiHeadDotProductAttention_0"; at the user's own line, that op where the error names its kind; None
    where none is."""
    if (found := _named_lines(fn, args, message)) is None:
        return None
    program, at = found
    kinds = converted_from(message)
    library = [op for op in program.ops if at(op.info.source) and op.info.user_source
               and op.info.user_source != op.info.source]
    yours = [op for op in program.ops if at(op.info.user_source) and op.info.primitive in kinds]
    ranked = [*(op for op in library if op.info.primitive in kinds), *yours, *library]
    if not ranked:
        return None
    op = ranked[0]
    module = f", in {op.info.name_stack}" if op.info.name_stack else ""
    return f"#{op.info.index} {op.info.primitive} at {op.info.user_source}{module}"


def line_hint(fn: Callable[..., Any], args: tuple, message: str) -> str | None:
    """Where the converter names a line but no op of the kind it names was created there (TensorFlow lowers a
    convolution through transposes, and refuses the 'tfl.transpose'), the ops the program creates at that
    line, with the module of the first: "keras/src/backend/jax/nn.py:762 creates #2 conv_general_dilated (in
    conv) and 51 more ops (conv_general_dilated)"; None where the program creates none there."""
    if (found := _named_lines(fn, args, message)) is None:
        return None
    program, at = found
    ops = [op.info for op in program.ops if at(op.info.source)]
    if not ops:
        return None
    first = ops[0]
    module = f" (in {first.name_stack})" if first.name_stack else ""
    more = ""
    if len(ops) > 1:
        kinds = ", ".join(dict.fromkeys(op.primitive for op in ops[1:]))
        more = f" and {len(ops) - 1} more op{'s' if len(ops) > 2 else ''} ({kinds})"
    return f"{first.source} creates #{first.index} {first.primitive}{module}{more}"


def primitive_hint(fn: Callable[..., Any], args: tuple, message: str) -> str | None:
    """The op of the program a converter's error names by its primitive ("reduce_window_max currently supports
    floating operand dtypes only, got bfloat16"): the first such op, of the dtype the message names where it
    names one, as "#41 reduce_window_max at case.py:110, in ResNet (bfloat16[1,8,8,64])"; None where the
    message names no primitive of the program."""
    import re

    from .program import flatten

    try:
        program = flatten(fn, args)
    except Exception:  # noqa: BLE001 - a courtesy: never hide the converter's own message
        return None
    words = set(re.findall(r"[a-z_][a-z0-9_]*", message))
    named = [op for op in program.ops if op.info.primitive in words]
    if not named:
        return None
    dtypes = [d for d in ("bfloat16", "float16", "float64", "float8") if d in message]
    typed = [op for op in named if any(str(t).startswith(tuple(dtypes)) for t in op.info.inputs)] if dtypes else []
    op = (typed or named)[0]
    module = f", in {op.info.name_stack}" if op.info.name_stack else ""
    return (f"#{op.info.index} {op.info.primitive} at {op.info.user_source or op.info.source or '?'}{module} "
            f"({', '.join(op.info.inputs[:2])})")


def _primitives(jaxpr: Any) -> set[str]:
    """Every primitive of ``jaxpr``, nested jaxprs included."""
    from jax.extend import core

    found = set()
    for eqn in jaxpr.eqns:
        found.add(eqn.primitive.name)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else [value]:
                if isinstance(sub, (core.Jaxpr, core.ClosedJaxpr)):
                    found |= _primitives(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub)
    return found
