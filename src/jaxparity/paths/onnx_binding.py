"""jax2onnx's check that a value it bound is part of the graph, answered at once where the answer is yes.

After lowering each equation, jax2onnx 0.17 asks whether every output value is "graph connected"
(``converter.output_binding._value_is_graph_connected``): it walks the graph's inputs, its initializers and
every output of every node built so far, comparing each with the value by identity and then by name. It
asks once or twice per equation, so a conversion costs the square of the program's size: 3.7 s of a 5.7 s
conversion of Keras's MobileNetV3Small (603 equations), profiled. The node that produces the value knows
whether it is in the graph (``Node.graph``); where it is, and lists the value among its outputs, the walk
would have found it by identity, and ``connected`` says yes at once. Every other value goes through
jax2onnx's own walk, so every answer is the one jax2onnx gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["fast_binding_check"]


@contextmanager
def fast_binding_check() -> Iterator[None]:
    """While converting: jax2onnx's connectivity check with the answer read off the value's producer first;
    nothing changes where this jax2onnx has no such check."""
    try:
        from jax2onnx.converter import output_binding
    except ImportError:
        yield
        return
    walk = getattr(output_binding, "_value_is_graph_connected", None)
    if walk is None or getattr(walk, "_jaxparity", False):
        yield
        return

    def connected(ctx: Any, value: Any) -> bool:
        try:
            producer = value.producer()
            if producer is not None and producer.graph is ctx.builder.nodes and any(
                    out is value for out in producer.outputs):
                return True
        except AttributeError:  # another onnx_ir: its own walk answers
            pass
        return bool(walk(ctx, value))

    connected._jaxparity = True  # type: ignore[attr-defined]
    output_binding._value_is_graph_connected = connected
    try:
        yield
    finally:
        output_binding._value_is_graph_connected = walk
