"""``iree``: the case's StableHLO compiled by IREE for the CPU (llvm-cpu) and run by IREE's runtime.

Options: ``target_cpu`` (default ``host``), ``cpu_features`` (space-separated, e.g. ``+avx2 +fma``),
``driver`` (``local-task`` or ``local-sync``) and ``flags``, more iree-compile flags separated by
spaces (``iree:flags=--iree-input-promote-bf16-to-f32``); later flags override earlier ones.
f64 stays f64 (``--iree-input-demote-f64-to-f32=false``; IREE demotes it by default). ``timeout``
is not enforced: the compile and the call run in this process, as for ``jit``.

What it shows: IREE's CPU pipeline runs ``iree-convert-bf16-arith-to-f32`` on every dispatch, whatever
the CPU: a bf16 value inside a dispatch is held in f32 and rounded to bf16 only where it is stored to
a bf16 buffer, so the roundings between fused bf16 ops are skipped (``IreePath.evidence`` lists them),
and a NaN that bf16 arithmetic returns comes back as +qNaN 0x7FC0, its sign dropped.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from ..cache import cache, fingerprint, machine, package_versions
from .base import Path, PathError, PathUnavailable

_INSTALL = "pip install 'jaxparity[iree]' (iree-base-compiler, iree-base-runtime)"
BF16_PASS = "iree-convert-bf16-arith-to-f32"
# arith/math ops whose bf16 result is exact or that only convert, and the vector ops that round.
_EXACT = {"constant", "extf", "truncf", "bitcast", "select", "cmpf", "negf", "absf", "copysign", "maximumf",
          "minimumf", "maxnumf", "minnumf", "floor", "ceil", "round", "roundeven", "trunc"}
_VECTOR_ARITH = {"fma", "reduction", "multi_reduction", "contract", "outerproduct"}
_OP = re.compile(r"=\s*(arith|math|vector)\.(\w+)\s*(?:<(\w+)>)?(.*)$")
# A linalg op with its lowering configuration, as iree-compile prints executable configurations:
# "%7 = linalg.matmul {lowering_config = #iree_cpu.lowering_config<...>} ins(%3, %4 : tensor<32x64xbf16>,
# tensor<64x64xbf16>) outs(%6 : tensor<32x64xbf16>) -> tensor<32x64xbf16>"
# A linalg op of a dispatch, its operand and result types; its lowering_config may come before its ins/outs
# (named ops) or after them, among its attrs (linalg.generic: a convolution).
_LINALG = re.compile(r"=\s*(?P<kind>linalg\.[\w.]+)\s*.*?ins\([^:]*:(?P<ins>[^)]*)\)\s*outs\([^:]*:(?P<outs>[^)]*)\)")
_DUMP = re.compile(r"^// -----// IR Dump (Before|After) \S+: \S+ //----- //$", re.M)
_BF16_IR: dict[str, str] = {}  # _dump_key -> the IR printed around BF16_PASS by the module's own compile


def _bf16_dump_flags(text: str) -> tuple[str, ...]:
    """Flags that print a bfloat16 module's IR before and after ``BF16_PASS`` (to stderr, large constants
    elided); none for a module without bfloat16."""
    if "bf16" not in text:
        return ()
    return (*(f"--mlir-print-ir-{when}={BF16_PASS}" for when in ("before", "after")),
            "--mlir-elide-elementsattrs-if-larger=16")


def _split_dump(stderr: str) -> tuple[str, str]:
    """(what iree-compile said, the IR it printed): the dumps start at the first ``_DUMP`` header; a warning
    printed after it is still what iree-compile said."""
    first = _DUMP.search(stderr)
    if first is None:
        return stderr, ""
    ir = stderr[first.start():]
    late = [line for line in ir.splitlines() if "warning:" in line]
    return stderr[:first.start()] + "".join(f"{line}\n" for line in late), ir


def _keep_ir(key: str, ir: str) -> None:
    _BF16_IR[key] = ir
    while len(_BF16_IR) > 4:  # a megabyte or more each: the last few modules
        _BF16_IR.pop(next(iter(_BF16_IR)))


def _dump_key(text: str, flags: list[str]) -> str:
    import hashlib

    return hashlib.sha256("\0".join([text, *flags]).encode()).hexdigest()


def _missing(module: str) -> bool:
    """Not importable (``sys.modules[name] = None`` marks a blocked module, here or in a parent)."""
    parts = module.split(".")
    if any(sys.modules.get(".".join(parts[: i + 1]), ...) is None for i in range(len(parts))):
        return True
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def stablehlo(fn: Callable[..., Any], args: tuple, debug_info: bool = False) -> str:
    """``jax.jit(fn)``'s StableHLO as IREE reads it: every argument kept (``main`` takes every leaf)
    and Shardy ops (``sdy.mesh``, ``sdy.sharding_constraint``; IREE has no such dialect) removed; with
    ``debug_info``, every op's location too."""
    import jax
    from jax.extend.mlir import ir

    module: Any = jax.jit(fn, keep_unused=True).lower(*args).compiler_ir("stablehlo")
    found: list[Any] = []

    def collect(op: Any) -> Any:
        if op.name.startswith("sdy."):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    for op in found:
        if op.name == "sdy.sharding_constraint":  # one device: the constraint is its operand
            op.results[0].replace_all_uses_with(op.operands[0])
        elif op.results:
            raise PathError(f"IREE cannot run {op.name} (Shardy) and jaxparity cannot remove it")
        op.erase()
    return module.operation.get_asm(enable_debug_info=debug_info)


_TYPE = re.compile(r"tensor<((?:\d+x)*)(\w+)>")
_MLIR_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64", "i1": "bool",
                "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "ui8": "uint8", "ui32": "uint32"}


def _jax_type(mlir: str) -> str:
    """'tensor<2x16x4x8xbf16>' -> 'bfloat16[2,16,4,8]', as the per-op view writes a value's type."""
    m = _TYPE.fullmatch(mlir.strip())
    if m is None:
        return mlir
    return f"{_MLIR_DTYPES.get(m[2], m[2])}[{','.join(d for d in m[1].split('x') if d)}]"


def _located(fn: Callable[..., Any], args: tuple, diagnostic: str) -> str | None:
    """The op of the program behind IREE's refusal, from the op it prints (``%34 = stablehlo.dot_general ... :
    (tensor<...>, tensor<...>) -> tensor<...>``): the program's op of that primitive with those operand and
    result types, as "#41 dot_general at model.py:38, in Block_0" (and how many others match); None where no
    op of the program matches."""
    from ..localize.program import flatten
    from ..localize.refusals import converted_from

    for m in re.finditer(r"stablehlo\.(\w+)[^\n]*?:\s*\(([^()]*)\)\s*->\s*(tensor<[^>]*>)", diagnostic):
        kinds = converted_from(f"'stablehlo.{m[1]}'")
        ins = tuple(_jax_type(t) for t in re.findall(r"tensor<[^>]*>", m[2]))
        out = _jax_type(m[3])
        try:
            ops = [op.info for op in flatten(fn, args).ops]
        except Exception:  # noqa: BLE001 - a courtesy: IREE's own words stand without it
            return None
        same = [op for op in ops if op.primitive in kinds and op.outputs[:1] == (out,) and op.inputs[:len(ins)] == ins]
        if same:
            op = same[0]
            module = f", in {op.name_stack}" if op.name_stack else ""
            more = f" (and {len(same) - 1} more of those types)" if len(same) > 1 else ""
            return f"#{op.index} {op.primitive} at {op.user_source or op.source or 'an unknown line'}{module}{more}"
    return None


def _diagnostic(error: Exception) -> str:
    """IREE's own words: the diagnostics of a CompilerToolError, from the first error, 3 lines; where
    iree-compile crashed (a stack dump, no diagnostic), the signal and the first of IREE's own frames."""
    text = str(error).split("Diagnostics:\n", 1)[-1].split("\n\nInvoked with:", 1)[0]
    if "Stack dump:" in text and not re.search(r"\berror:", text):
        return _crash(str(error), text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = next((i for i, ln in enumerate(lines) if "error" in ln.lower()), 0)
    return "\n".join(ln if len(ln) <= 300 else ln[:297] + "..." for ln in lines[first:first + 3])


_SIGNALS = {-11: "a segmentation fault", -6: "an abort", -4: "an illegal instruction", -8: "a floating-point trap"}


def _crash(message: str, dump: str) -> str:
    """``iree-compile crashed (a segmentation fault) in ScfWhileOpConversion::matchAndRewrite(scf::WhileOp)``:
    the first frame in IREE's compiler (else in MLIR), without its argument types but for the op it converts."""
    code = re.search(r"Error code: (-?\d+)", message)
    signal = _SIGNALS.get(int(code[1]), f"exit code {code[1]}") if code else "a crash"
    frames = re.findall(r"^\s*#\d+ 0x[0-9a-f]+ (.+?) \S+:\d+:\d+$", dump, re.M)
    frame = next((f for f in frames if "iree_compiler" in f), None) or next((f for f in frames if "mlir::" in f), "")
    where = ""
    if frame:
        name = re.sub(r"mlir::iree_compiler::|mlir::", "", frame.replace("(anonymous namespace)::", "").split("(", 1)[0])
        op = re.search(r"mlir::(\w+)::(\w+Op)\b", frame)
        where = f" in {name}" + (f" ({op[1]}.{re.sub(r'Op$', '', op[2]).lower()})" if op else "")
    return (f"iree-compile crashed ({signal}){where}: a bug of IREE's compiler, not of the model "
            "(report it to iree-org/iree with the StableHLO: `jaxparity reduce` shrinks it)")


def _bf16_ops(ir: str) -> tuple[Counter[str], int]:
    """bf16-result ops that round (``vector.fma``, ``arith.mulf``...) and the number of truncf to bf16."""
    rounding: Counter[str] = Counter()
    truncs = 0
    for line in ir.splitlines():
        m = _OP.search(line)
        if not m or "bf16" not in re.split(r"\s(?:to|into)\s|:\s", m[4])[-1]:  # the result type
            continue
        if m[2] == "truncf":
            truncs += 1
        elif (m[2] in _VECTOR_ARITH if m[1] == "vector" else m[2] not in _EXACT) and m[3] not in _EXACT:
            rounding[f"{m[1]}.{m[2]}"] += 1
    return rounding, truncs


# How a reproducer runs a function on IREE (``Path.repro_runner``): the path's compile flags and driver.
_RUNNER = '''def run_iree(f, args):  # StableHLO -> iree-compile (llvm-cpu) -> IREE runtime
    from iree import compiler, runtime
    text = jax.jit(f, keep_unused=True).lower(*args).as_text(dialect="stablehlo")
    vmfb = compiler.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                extra_args={flags})
    out = runtime.load_vm_flatbuffer(vmfb, driver={driver!r}).main(*args)
    return [np.asarray(y.to_host()) for y in (out if isinstance(out, (tuple, list)) else [out])]
'''


class IreePath(Path):
    name = "iree"
    capabilities = frozenset({"other_compiler"})
    heavy = True
    cost = 3.0  # iree-compile
    distributions = ("iree-base-compiler", "iree-base-runtime")
    summary = "StableHLO compiled by IREE (iree-compile, llvm-cpu) and run by the IREE runtime on the CPU"
    evidence_label = "IREE"
    options_help = {
        "target_cpu": "LLVM CPU to compile for (default host; generic, skylake, znver4...)",
        "cpu_features": "LLVM CPU features separated by spaces, e.g. '+avx2 +fma' (default: target_cpu's)",
        "driver": "IREE runtime driver: local-task (default, multithreaded) or local-sync",
        "flags": "more iree-compile flags separated by spaces, e.g. --iree-input-promote-bf16-to-f32",
    }

    def unavailable_reason(self) -> str | None:
        if _missing("iree.compiler") or _missing("iree.runtime"):
            return f"IREE is not installed: {_INSTALL}"
        return None

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        path = type(self)(self.repro_options(extra)) if extra else self
        return _RUNNER.format(flags=repr(path.compile_flags()), driver=path.options.get("driver", "local-task"))

    def compile_flags(self) -> list[str]:
        """Flags after ``--iree-input-type=stablehlo --iree-hal-target-backends=llvm-cpu``."""
        flags = [f"--iree-llvmcpu-target-cpu={self.options.get('target_cpu', 'host')}",
                 "--iree-input-demote-f64-to-f32=false"]
        if self.options.get("cpu_features"):
            flags.append(f"--iree-llvmcpu-target-cpu-features={','.join(self.options['cpu_features'].split())}")
        return flags + self.options.get("flags", "").split()

    def _compile(self, fn: Callable[..., Any], args: tuple, extra: tuple[str, ...] = ()) -> tuple[bytes, str]:
        """iree-compile the function's StableHLO; returns the output and what IREE wrote to stderr."""
        if reason := self.unavailable_reason():
            raise PathUnavailable(reason)
        text = stablehlo(fn, args)
        try:
            return self._cached_compile(text, extra)
        except PathError as e:
            diagnostic = getattr(e, "diagnostic", "")
            said = [f"the op IREE refuses, in your code: {yours}"] if (yours := _located(fn, args, diagnostic)) else []
            if (why := self._without_algorithm(text, extra, diagnostic)) is not None:
                said.append(why)
            if not said:
                raise
            raise PathError(f"{e}\n" + "\n".join(f"({s})" for s in said)) from None

    def _without_algorithm(self, text: str, extra: tuple[str, ...], diagnostic: str) -> str | None:
        """Where IREE refuses a dot_general that carries a dot algorithm (``precision=DotAlgorithmPreset...``,
        which jax.nn.dot_product_attention sets on bf16 logits): the module compiled again without the
        algorithms; where that compiles, the algorithm is what IREE refuses, said so. None otherwise."""
        found = re.search(r"algorithm = (?:#stablehlo\.dot_algorithm)?<([^>]*)>", diagnostic)
        if "dot_general" not in diagnostic or found is None:
            return None
        plain = re.sub(r",\s*algorithm = <[^>]*>", "", text)
        if plain == text:
            return None
        try:
            self._compile_text(plain, extra)
        except Exception:  # noqa: BLE001 - refused for another reason too: nothing said
            return None
        kinds = dict(re.findall(r"(\w+_type) = (\w+)", found[1]))
        algorithm = " x ".join(kinds.get(k, "?") for k in ("lhs_precision_type", "rhs_precision_type"))
        return (f"the dot_general carries a dot algorithm ({algorithm} -> {kinds.get('accumulation_type', '?')}, "
                "a precision=jax.lax.DotAlgorithmPreset; jax.nn.dot_product_attention sets one on bf16 inputs): "
                "the same module without dot algorithms compiles, so the algorithm is what IREE refuses; compute that "
                "dot with precision left at its default (preferred_element_type=jnp.float32 keeps float32 "
                "accumulation) for IREE")

    def _cached_compile(self, text: str, extra: tuple[str, ...] = ()) -> tuple[bytes, str]:
        """``_compile_text``, or its output kept in jaxparity's cache. The module's own compile (no ``extra``)
        of a bfloat16 model also prints the IR before and after ``BF16_PASS`` (``evidence`` reads it; printing
        does not change the module: the same bytes), kept beside the module."""
        dump = _bf16_dump_flags(text) if not extra else ()
        store = cache()
        if store is None:
            vmfb, stderr = self._compile_text(text, (*extra, *dump))
            if not dump:
                return vmfb, stderr
            warnings, ir = _split_dump(stderr)
            _keep_ir(_dump_key(text, self.compile_flags()), ir)
            return vmfb, warnings
        from iree.compiler.version import VERSION

        flags = [*self.compile_flags(), *extra, *dump]
        key = fingerprint("iree", text, flags, VERSION, package_versions("iree-base-compiler"),
                          machine())  # target_cpu=host compiles for this CPU's features

        def make(where: Any) -> dict[str, Any]:
            vmfb, stderr = self._compile_text(text, (*extra, *dump))
            (where / "module.vmfb").write_bytes(vmfb if isinstance(vmfb, bytes) else str(vmfb).encode())
            if not dump:
                return {"stderr": stderr}
            warnings, ir = _split_dump(stderr)
            (where / "bf16_pass.mlir").write_text(ir)
            return {"stderr": warnings}

        entry = store.fetch("iree", key, make)
        self._reused = entry.short if entry.reused else None
        kept = _dump_key(text, self.compile_flags())
        if dump and kept not in _BF16_IR and (entry.dir / "bf16_pass.mlir").exists():  # a megabyte: read once
            _keep_ir(kept, (entry.dir / "bf16_pass.mlir").read_text())
        return (entry.dir / "module.vmfb").read_bytes(), entry.meta["stderr"]

    def _compile_text(self, text: str, extra: tuple[str, ...] = ()) -> tuple[bytes, str]:
        from iree import compiler

        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):  # compile_str copies iree-compile's stderr there
                out = compiler.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                           extra_args=[*self.compile_flags(), *extra], output_mlir_debuginfo=False)
        except compiler.CompilerToolError as e:
            diag = _diagnostic(e)
            op, target = re.search(r"operation '([\w.]+)'", diag), re.search(r'call_target_name = "([^"]+)"', diag)
            what = f" (op {op[1]}{f', call_target_name {target[1]}' if target else ''})" if op else ""
            hint = ""
            if "__truncsfbf2" in diag or "__truncsfhf2" in diag:  # iree-org/iree#13499, #14549
                narrow = "bfloat16" if "bf2" in diag else "float16"
                hint = (f"\n(the CPU code IREE generated calls the compiler runtime's float32 -> {narrow} "
                        "conversion, which IREE's linker does not provide: a known llvm-cpu limitation with "
                        f"{narrow} conversions; run a float32 version of the model on IREE)")
            refused = PathError(f"IREE could not compile the case{what}:\n{diag}{hint}")
            refused.diagnostic = str(e)  # type: ignore[attr-defined]  # the whole of it, for ``_located``
            raise refused from None
        return out, stderr.getvalue()

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax

        from ..pytree import host

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)  # Python scalars get JAX's dtypes
        out_tree: Any = jax.tree_util.tree_structure(jax.eval_shape(fn, *args))
        vmfb, warnings = self._compile(fn, args)
        from iree import runtime
        from iree.compiler.version import VERSION

        driver = self.options.get("driver", "local-task")
        try:  # bf16 crosses as ml_dtypes.bfloat16 both ways, bit for bit
            module = runtime.load_vm_flatbuffer(vmfb, driver=driver)
            result = module.main(*[host(x) for x in jax.tree_util.tree_leaves(args)])
        except (RuntimeError, ValueError) as e:
            raise PathError(f"the IREE runtime ({driver}) failed: {str(e).strip().splitlines()[0]}") from None
        flat = [] if result is None else list(result) if isinstance(result, (tuple, list)) else [result]
        if len(flat) != out_tree.num_leaves:
            raise PathError(f"IREE returned {len(flat)} outputs, the function has {out_tree.num_leaves}")
        reused = getattr(self, "_reused", None)
        # No seconds here: the note is report text, the same on an idle machine and a loaded one (the path's
        # time is in its progress line, --verbose's time column and --json).
        how = (f"reused from jaxparity's cache (entry {reused}: same StableHLO, flags, version and CPU; "
               "--no-cache compiles again)" if reused else "compiled")
        self.notes.append(f"IREE {VERSION}, target llvm-cpu, driver {driver}; {how} to "
                          f"{len(vmfb)} bytes; iree-compile flags: {' '.join(self.compile_flags())}")
        warned = [ln.strip() for ln in warnings.splitlines() if "warning:" in ln]
        self.notes.extend(f"iree-compile warned: {ln[:200]}" for ln in warned[:1])
        return jax.tree_util.tree_unflatten(out_tree, [x.to_host() for x in flat])

    def alternatives(self) -> tuple[tuple[Path, str], ...]:
        """IREE's own settings that compile the same program another way, each re-run as a fix: the optimization
        level, data tiling, compile-time evaluation of constants, aggressive fusion, microkernels, and the
        generic CPU (other vector widths: another order of each reduction)."""
        mine = self.options.get("flags", "")
        tried = (("--iree-opt-level=O0", "compile with IREE's optimization level O0 (iree-compile --iree-opt-level=O0)"),
                 ("--iree-opt-data-tiling=true", "compile with IREE's data tiling (--iree-opt-data-tiling=true)"),
                 ("--iree-opt-const-eval=false", "compile without IREE's evaluation of constants at compile time "
                  "(--iree-opt-const-eval=false)"),
                 ("--iree-dispatch-creation-enable-aggressive-fusion=true", "compile with IREE's aggressive fusion "
                  "(--iree-dispatch-creation-enable-aggressive-fusion=true)"),
                 ("--iree-llvmcpu-enable-ukernels=all", "compile with IREE's CPU microkernels "
                  "(--iree-llvmcpu-enable-ukernels=all)"))
        found: list[tuple[Path, str]] = [(self.with_option("flags", f"{mine} {flag}".strip()), words)
                                         for flag, words in tried if flag.split("=")[0] not in mine]
        if self.options.get("target_cpu", "host") != "generic":
            found.append((self.with_option("target_cpu", "generic"), "compile for the generic CPU "
                          "(--iree-llvmcpu-target-cpu=generic: other vector widths, another order of each reduction)"))
        return tuple(found)

    def dispatches(self, program: Any, flat_args: Sequence[Any]) -> list[Any]:
        """IREE's dispatches of ``program`` (``iree_dispatches.Dispatch``): the ops each computes, the values
        each stores."""
        import jax

        from .iree_dispatches import dispatch_map, scoped_function

        if reason := self.unavailable_reason():
            raise PathUnavailable(reason)
        args = tuple(jax.numpy.asarray(x) for x in flat_args)
        text = stablehlo(scoped_function(program), args, debug_info=True)
        return dispatch_map(program, text, lambda t, extra: self._compile_text(t, extra)[0])

    def artifact(self, fn: Callable[..., Any], args: tuple) -> Any:
        """IREE's executable configurations read back (``--compile-to=executable-configurations``): each
        dispatch's linalg ops with the lowering configuration IREE chose for them, their operand types and
        the type of the buffer they accumulate into (a bf16 matmul accumulates in its bf16 output, tiled by
        ``vector_reduction``). No tensor values: IREE runs a dispatch as one function."""
        import jax

        from .artifact import Artifact, Kernel

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)
        out, _ = self._compile(fn, args, ("--compile-to=executable-configurations",
                                          "--mlir-elide-elementsattrs-if-larger=16"))
        text = out.decode() if isinstance(out, bytes) else str(out)
        kernels: list[Kernel] = []
        dispatch = "?"
        for line in text.splitlines():
            head = re.search(r"func\.func @(\w+)\(", line)
            if head:
                dispatch = head[1]
                continue
            op = _LINALG.search(line)
            if op is None or "lowering_config" not in line:
                continue
            config = re.search(r"lowering_config<(?P<config>[^>]*)>", line)
            if config is None:
                raise PathError(f"IREE's lowering configuration could not be read: {line.strip()[:120]}")
            attributes = {"dispatch": dispatch, "operands": op["ins"].strip(), "accumulator": op["outs"].strip()}
            attributes.update((k, v) for k, v in re.findall(r"(\w+) = (\[[^\]]*\])", config["config"]))
            kernels.append(Kernel(len(kernels), op["kind"], (), (), attributes))
        found = Artifact("IREE's compiled dispatches", tuple(kernels), {}, {}, ())
        found.notes.append(f"read IREE's executable configurations back: {len({k.attributes['dispatch'] for k in kernels})} "
                           f"dispatches, {len(kernels)} linalg ops with a lowering configuration")
        return found

    def evidence(self, fn: Callable[..., Any], args: tuple, limit: int = 12) -> list[str]:
        """From IREE's IR before and after ``iree-convert-bf16-arith-to-f32``, per dispatch: the bf16
        arithmetic ops (each of which rounds to bf16) IREE computes in f32 instead, and how many
        bf16-rounding ops are left. A summary line, then at most ``limit`` dispatches."""
        import jax

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)
        text = stablehlo(fn, args)
        if "bf16" not in text:  # a model without bfloat16: nothing to say of it
            return []
        # The IR as the module's own compile printed it: kept here, or in jaxparity's cache by the worker that ran it.
        if cache() is not None and _dump_key(text, self.compile_flags()) not in _BF16_IR:
            self._compile(fn, args)
        ir = _BF16_IR.get(_dump_key(text, self.compile_flags()))
        if ir is None:  # no cache: the compile stops once the pass has run
            _, ir = self._compile(fn, args, ("--compile-to=executable-targets", *_bf16_dump_flags("bf16")))
        parts = _DUMP.split(ir)  # [preamble, when, body, when, body...]
        by_fn: dict[str, dict[str, str]] = {}
        for when, body in zip(parts[1::2], parts[2::2]):
            func = re.search(r"func\.func @([\w$.-]+)", body)
            by_fn.setdefault(func[1] if func else "?", {})[when] = body
        natural = lambda kv: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", kv[0])]  # noqa: E731
        lines, ops_before, ops_after = [], 0, 0
        for name, dumps in sorted(by_fn.items(), key=natural):
            (before, t_before), (after, t_after) = _bf16_ops(dumps.get("Before", "")), _bf16_ops(dumps.get("After", ""))
            if not before:
                continue
            n, left = sum(before.values()), sum(after.values())
            ops = ", ".join(f"{k} {op}" for op, k in before.most_common())
            how = f"computed in f32 by {BF16_PASS}" if not left else f"{left} still bf16 after {BF16_PASS}"
            lines.append(f"{name}: {n} bf16 arithmetic ops ({ops}) {how}; bf16-rounding ops: "
                         f"{n + t_before} -> {left + t_after}")
            ops_before, ops_after = ops_before + n, ops_after + left
        flags = " ".join(self.compile_flags())
        if not by_fn:
            return [f"{BF16_PASS} did not run: no dispatch reached it (iree-compile {flags})"]
        if not lines:
            return [f"no bf16 arithmetic reached {BF16_PASS} in {len(by_fn)} dispatches (iree-compile {flags})"]
        head = (f"{len(lines)} of {len(by_fn)} dispatches do bf16 arithmetic: {ops_before - ops_after} of "
                f"{ops_before} ops computed in f32 by {BF16_PASS} (iree-compile {flags})")
        return [head, *lines[:limit], *([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])]
