"""``iree``: the case's StableHLO compiled by IREE for the CPU (llvm-cpu) and run by IREE's runtime.

Options: ``target_cpu`` (default ``host``), ``cpu_features`` (space-separated, e.g. ``+avx2 +fma``),
``driver`` (``local-task`` or ``local-sync``) and ``flags``, more iree-compile flags separated by
spaces (``iree:flags=--iree-input-promote-bf16-to-f32``); later flags override earlier ones.
f64 stays f64 (``--iree-input-demote-f64-to-f32=false``; IREE demotes it by default).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from collections import Counter
from typing import Any, Callable

from .base import Path, PathError, PathUnavailable

_INSTALL = "pip install 'jaxparity[iree]' (iree-base-compiler==3.13.0 iree-base-runtime==3.13.0)"
BF16_PASS = "iree-convert-bf16-arith-to-f32"
# arith/math ops whose bf16 result is exact (no rounding) or that only convert; the vector ops that round.
_EXACT = {"constant", "extf", "truncf", "bitcast", "select", "cmpf", "negf", "absf", "copysign", "maximumf",
          "minimumf", "maxnumf", "minnumf", "floor", "ceil", "round", "roundeven", "trunc"}
_VECTOR_ARITH = {"fma", "reduction", "multi_reduction", "contract", "outerproduct"}
_OP = re.compile(r"=\s*(arith|math|vector)\.(\w+)\s*(<\w+>)?(.*)$")
_DUMP = re.compile(r"^// -----// IR Dump (Before|After) \S+: (\S+) //----- //$", re.M)


def _missing(module: str) -> bool:
    """Not importable (``sys.modules[name] = None`` marks a blocked module, here or in a parent)."""
    parts = module.split(".")
    for name in (".".join(parts[: i + 1]) for i in range(len(parts))):
        if name in sys.modules and sys.modules[name] is None:
            return True
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _diagnostic(error: Exception) -> str:
    """IREE's own words: the diagnostics section of a CompilerToolError, from the first error on."""
    text = str(error).split("Diagnostics:\n", 1)[-1].split("\n\nInvoked with:", 1)[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = next((i for i, ln in enumerate(lines) if "error" in ln.lower()), 0)
    return "\n".join(ln if len(ln) <= 300 else ln[:297] + "..." for ln in lines[first:first + 3])


def _bf16_ops(ir: str) -> tuple[Counter[str], int]:
    """bf16-result ops that round (``vector.fma``, ``arith.mulf``...) and the number of truncf to bf16."""
    rounding: Counter[str] = Counter()
    truncs = 0
    for line in ir.splitlines():
        m = _OP.search(line)
        if not m:
            continue
        rest = m[4]
        result = re.split(r"\s(?:to|into)\s", rest)[-1] if re.search(r"\s(?:to|into)\s", rest) else rest
        if "bf16" not in result.rsplit(":", 1)[-1]:
            continue
        if m[2] == "truncf":
            truncs += 1
        elif (m[2] in _VECTOR_ARITH if m[1] == "vector" else m[2] not in _EXACT) and m[3] not in ("<maximumf>", "<minimumf>", "<maxnumf>", "<minnumf>"):
            rounding[f"{m[1]}.{m[2]}"] += 1
    return rounding, truncs


class IreePath(Path):
    name = "iree"
    summary = "StableHLO compiled by IREE (iree-compile, llvm-cpu) and run by the IREE runtime on the CPU"
    options_help = {
        "target_cpu": "LLVM CPU to compile for (default host; generic, skylake, znver4...)",
        "cpu_features": "LLVM CPU features separated by spaces, e.g. '+avx2 +fma' (default: those of target_cpu)",
        "driver": "IREE runtime driver: local-task (default, multithreaded) or local-sync",
        "flags": "more iree-compile flags separated by spaces, e.g. --iree-input-promote-bf16-to-f32",
    }

    def unavailable_reason(self) -> str | None:
        if _missing("iree.compiler") or _missing("iree.runtime"):
            return f"IREE is not installed: {_INSTALL}"
        return None

    def compile_flags(self) -> list[str]:
        """The iree-compile flags this path adds to ``--iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu``."""
        flags = [f"--iree-llvmcpu-target-cpu={self.options.get('target_cpu', 'host')}",
                 "--iree-input-demote-f64-to-f32=false"]
        if self.options.get("cpu_features"):
            flags.append(f"--iree-llvmcpu-target-cpu-features={','.join(self.options['cpu_features'].split())}")
        return flags + self.options.get("flags", "").split()

    def _compile(self, fn: Callable[..., Any], args: tuple, extra: tuple[str, ...] = ()) -> tuple[bytes, str]:
        """iree-compile the function's StableHLO; returns the output and what IREE wrote to stderr."""
        import jax

        try:
            from iree import compiler
        except ImportError as e:
            raise PathUnavailable(f"IREE is not installed: {_INSTALL}") from e
        text = jax.jit(fn, keep_unused=True).lower(*args).as_text()  # keep_unused: main takes every leaf
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                out = compiler.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                           extra_args=[*self.compile_flags(), *extra],
                                           output_mlir_debuginfo=False)  # no loc(...) in IR dumps
        except compiler.CompilerToolError as e:
            diag = _diagnostic(e)
            op = re.search(r"operation '([\w.]+)'", diag)
            target = re.search(r'call_target_name = "([^"]+)"', diag)
            what = f" (op {op[1]}{f', call_target_name {target[1]}' if target else ''})" if op else ""
            raise PathError(f"IREE could not compile the case{what}:\n{diag}") from None
        return out, stderr.getvalue()

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax
        from iree import runtime
        from iree.compiler.version import VERSION

        from ..pytree import host

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)  # Python scalars get JAX's dtypes
        out_tree = jax.tree_util.tree_structure(jax.eval_shape(fn, *args))
        vmfb, warnings = self._compile(fn, args)
        driver = self.options.get("driver", "local-task")
        try:
            module = runtime.load_vm_flatbuffer(vmfb, driver=driver)
            result = module.main(*[host(x) for x in jax.tree_util.tree_leaves(args)])
        except (RuntimeError, ValueError) as e:
            raise PathError(f"the IREE runtime ({driver}) failed: {str(e).strip().splitlines()[0]}") from None
        flat = [] if result is None else list(result) if isinstance(result, (tuple, list)) else [result]
        if len(flat) != out_tree.num_leaves:
            raise PathError(f"IREE returned {len(flat)} outputs, the function has {out_tree.num_leaves}")
        self.notes.append(f"IREE {VERSION} (llvm-cpu, driver {driver}), "
                          f"{len(vmfb)} byte vmfb; iree-compile flags: {' '.join(self.compile_flags())}")
        warned = [ln.strip() for ln in warnings.splitlines() if "warning:" in ln]
        if warned:
            self.notes.append(f"iree-compile warned: {warned[0][:200]}")
        return jax.tree_util.tree_unflatten(out_tree, [x.to_host() for x in flat])

    def evidence(self, fn: Callable[..., Any], args: tuple, limit: int = 12) -> list[str]:
        """Per dispatch, from IREE's IR before and after ``iree-convert-bf16-arith-to-f32``: which
        bf16 arithmetic (each op of which rounds its result to bf16) IREE computes in f32 instead,
        and how many roundings to bf16 (``arith.truncf``) are left. A summary line, then <= ``limit``."""
        import jax

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)
        dump = f"--mlir-print-ir-{{}}={BF16_PASS}"
        _, ir = self._compile(fn, args, ("--compile-to=executable-targets", dump.format("before"),
                                         dump.format("after"), "--mlir-elide-elementsattrs-if-larger=16"))
        parts = _DUMP.split(ir)  # [junk, when, pass, body, when, pass, body...]
        by_fn: dict[str, dict[str, str]] = {}
        for when, body in zip(parts[1::3], parts[3::3]):
            name = re.search(r"func\.func @([\w$.-]+)", body)
            by_fn.setdefault(name[1] if name else "?", {})[when] = body
        if not by_fn:
            return [f"{BF16_PASS} did not run: no dispatch reached it ({' '.join(self.compile_flags())})"]
        lines, total = [], [0, 0, 0]
        natural = lambda kv: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", kv[0])]  # noqa: E731
        for name, dumps in sorted(by_fn.items(), key=natural):
            before, truncs_before = _bf16_ops(dumps.get("Before", ""))
            after, truncs_after = _bf16_ops(dumps.get("After", ""))
            if not before:
                continue
            ops = ", ".join(f"{n} {op}" for op, n in before.most_common())
            how = (f"computed in f32 by {BF16_PASS}" if not after
                   else f"{sum(after.values())} still in bf16 after {BF16_PASS}: {dict(after)}")
            lines.append(f"{name}: {sum(before.values())} bf16 arithmetic ops ({ops}) {how}; "
                         f"bf16-rounding ops in the IR: {sum(before.values()) + truncs_before} -> "
                         f"{sum(after.values()) + truncs_after}")
            total = [total[0] + 1, total[1] + sum(before.values()), total[2] + sum(after.values())]
        head = (f"{total[0]} of {len(by_fn)} dispatches do bf16 arithmetic: {total[1]} ops, "
                f"{total[1] - total[2]} of them computed in f32 by {BF16_PASS} "
                f"(iree-compile {' '.join(self.compile_flags())})")
        if not lines:
            head = f"no bf16 arithmetic reached {BF16_PASS} in {len(by_fn)} dispatches"
        more = [f"... and {len(lines) - limit} more dispatches"] if len(lines) > limit else []
        return [head, *lines[:limit], *more]
