"""Running one path in this process: exceptions become a run that says what failed, never a raise."""

from __future__ import annotations

import os
import re
import time
import traceback
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ..equivalence.rules import OutputRule
from ..paths import Path, PathError, PathUnavailable
from .runs import PathRun

__all__ = ["plain_call_failure", "run_in_process", "to_host"]


def _user_frame(exc: BaseException) -> str:
    """' at model.py:12' for the innermost frame outside jax/flax/jaxparity, if any."""
    skip = (os.sep + "jax" + os.sep, os.sep + "flax" + os.sep, os.sep + "jaxparity" + os.sep, "site-packages")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not any(s in f.filename for s in skip)]
    return f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def run_in_process(path: Path, fn: Callable[..., Any], args: tuple, timeout: float | None = None, *,
                   on_host: bool = True) -> PathRun:
    """Run one path here. Exceptions become an ``error`` PathRun naming the path and the cause.

    With ``on_host=False`` the outputs stay as the path returned them (device arrays) until
    ``to_host``: many-inputs mode copies a chunk's outputs together, after running the chunk.
    """
    from ..pytree import named_leaves, to_numpy

    reason = path.unavailable_reason()
    if reason:
        return PathRun(path.spec, "unavailable", message=reason)
    start = time.perf_counter()
    try:
        out = path.run(fn, args, timeout=timeout)
        if on_host:
            out = to_numpy(out)
    except PathUnavailable as e:
        return PathRun(path.spec, "unavailable", message=str(e))
    except PathError as e:
        failed = PathRun(path.spec, "error", seconds=time.perf_counter() - start, message=str(e), fault=e.fault)
        return failed if e.fault is not None else _with_hint(failed, path, fn, args)  # a fault names its op
    except Exception as e:  # the user's function or a runtime raised: report, never propagate
        return _with_hint(_error_run(path.spec, e, time.perf_counter() - start), path, fn, args)
    outputs = tuple(named_leaves(out, "out"))
    return PathRun(path.spec, "ok", outputs, time.perf_counter() - start, notes=tuple(path.notes),
                   output_rules=_output_rules(path, fn, args), device=_device(path),
                   ideal_uncertainty=path.ideal_uncertainty)


def _device(path: Path) -> str | None:
    try:
        return path.device()
    except Exception:  # naming the device never fails a run
        return None


# Per (function, argument structure, shapes and dtypes) in this process; each entry holds its function,
# so that its id cannot be reused by another while the entry lives.
_RULES: dict[tuple, tuple[Callable[..., Any], dict[str, OutputRule]]] = {}


def _output_rules(path: Path, fn: Callable[..., Any], args: tuple) -> dict[str, OutputRule]:
    """The function's output rules (see ``equivalence``), read from its trace once a path that traces it
    has run: a function that crashes or hangs only when traced then already failed in that path's own
    isolated run, never here. Eager and observed outputs do not trace."""
    if not path.traces:
        return {}
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    key = (id(fn), tree, tuple((np.shape(x), str(getattr(x, "dtype", type(x)))) for x in leaves))
    hit = _RULES.get(key)
    if hit is None or hit[0] is not fn:
        try:
            from ..equivalence.producers import output_rules

            rules = output_rules(fn, args)
        except Exception:  # another JAX (an --env), or the trace needs the path's config: element by element
            rules = {}
        _RULES[key] = hit = (fn, rules)
        while len(_RULES) > 8:
            del _RULES[next(iter(_RULES))]
    return hit[1]


def to_host(run: PathRun) -> PathRun:
    """``run`` (from ``run_in_process(..., on_host=False)``) with its outputs copied to numpy; the
    copy counts in its seconds, and a copy that fails makes it an ``error`` run, as it would have."""
    from ..pytree import host

    if run.outputs is None:
        return run
    start = time.perf_counter()
    try:
        outputs = tuple((name, host(x)) for name, x in run.outputs)
    except Exception as e:
        return _error_run(run.spec, e, run.seconds + time.perf_counter() - start)
    return replace(run, outputs=outputs, seconds=run.seconds + time.perf_counter() - start)


def plain_call_failure(fn: Callable[..., Any], args: tuple, notes: Sequence[str] = ()) -> str | None:
    """Why ``fn(*args)``, called as the user would, fails (the exception and the user's line), or None when
    it runs: told apart from a path's failure, a model that fails on its own inputs is the case's error.
    ``notes``: the case's notes (an argument bound in as static ``None`` is said with the failure)."""
    import jax

    try:
        jax.block_until_ready(fn(*args))
    except Exception as e:
        msg = f"{type(e).__name__}: {e}".strip().splitlines()
        nones = [m for note in notes if note.startswith("static") for m in re.findall(r"argument \d+ = None", note)]
        hint = (f" ({', '.join(nones)}: a factory that returns `model.eval()` passes None, since flax NNX's "
                "eval() changes the module in place and returns None; return the module itself)" if nones else "")
        return (msg[0] if msg else type(e).__name__) + _user_frame(e) + hint
    return None


def _with_hint(run: PathRun, path: Path, fn: Callable[..., Any], args: tuple) -> PathRun:
    """A failed run with what in the program may have made the runtime refuse it: its host callbacks, named
    where the runtime's error names one (``localize.callbacks``), else ``localize.refusals``."""
    from ..localize.callbacks import find_callbacks, names_a_callback
    from ..localize.refusals import random_hint, refusal_hint

    if names_a_callback(run.message) and (found := find_callbacks(fn, args)):
        return replace(run, callbacks=found)  # the runtime's own words stand, said with the calls (report.callbacks)
    said = (run.message or "").rstrip(". ")
    hint = refusal_hint(fn, args)
    if hint:
        return replace(run, message=f"{said}. What in the program a runtime may refuse: {hint}")
    if path.refuses_random:
        hint = random_hint(fn, args)
        if hint:
            return replace(run, message=f"{said}. Likely why: {hint}")
    return run


def _error_run(spec: str, e: Exception, seconds: float) -> PathRun:
    msg = f"{type(e).__name__}: {e}".strip().splitlines()
    text = (msg[0] if msg else type(e).__name__) + _user_frame(e)
    return PathRun(spec, "error", seconds=seconds, message=text)

