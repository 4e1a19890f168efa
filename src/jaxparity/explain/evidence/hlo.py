"""Compiler evidence that does not perturb the program: declared bf16/f16 results that XLA kept wider.

The declared types come from the HLO that XLA receives (the lowered StableHLO converted 1:1, its
debug locations turned into ``metadata={op_name=... stack_frame_id=...}``), what XLA does from the
optimized HLO of the same compile; an op is identified in both by op name and innermost source
location. A declared narrow result was kept wider when a wider float computed by the op reaches
another op (or the program output) without a ``convert`` to a narrow type. Only text is read: the
program is compiled with the options it runs with and never executed. With ``passes``, a second
compile dumps every pass (into a temporary directory, deleted afterwards) to name the first pass
after which the rounding is missing.
"""

from __future__ import annotations

import os
import re
import sysconfig
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

NARROW = {"bf16": "bfloat16", "f16": "float16"}
WIDE = {"f32": "float32", "f64": "float64"}
# Instructions that move a value without changing its precision: followed to find its real users.
_MOVES = {"bitcast", "copy", "reshape", "transpose", "broadcast", "slice", "dynamic-slice", "concatenate",
          "pad", "reverse", "tuple", "get-tuple-element", "copy-start", "copy-done"}
_NOT_EXAMINED = {"parameter", "constant", "iota", "fusion", "call", "while", "conditional", "tuple"}
_OUTPUT = "<program output>"

Key = tuple[str, tuple | None]  # (full op name, innermost source location)


@dataclass(frozen=True)
class WidenedResult:
    """One declared bf16/f16 result that the compiled program uses at a wider float type."""

    primitive: str
    declared_dtype: str
    computed_dtype: str
    op_name: str
    source: str | None
    hlo_line: str
    removed_by_pass: str | None


@dataclass(frozen=True)
class CompilerEvidence:
    """What the optimized HLO of one compiled path shows about the program's narrow float results."""

    path: str
    widened: tuple[WidenedResult, ...]
    declared_narrow_ops: int  # distinct (op name, source location) that compute a bf16/f16 result
    notes: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# HLO text: one parser for the unoptimized, the per-pass and the optimized module.

_COMP = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\)\s*->\s*.*\{\s*$")
_INSTR = re.compile(r"^\s+(ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*"
                    r"(?P<type>\((?:[^()]|\([^()]*\))*\)|\w+\[[^\]]*\](?:\{[^}]*\})?)\s+"
                    r"(?P<opcode>[\w\-]+)\((?P<rest>.*)$")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


@dataclass
class _Instr:
    name: str
    comp: str
    etype: str | None  # element type; None for a tuple
    opcode: str
    operands: list[str]
    attrs: str
    op_name: str | None
    frame: int | None
    root: bool
    line: str
    keys: tuple[Key, ...] = ()

    def attr(self, name: str) -> str | None:
        m = re.search(r"\b" + name + r"=%?([\w.\-]+)", self.attrs)
        return m and m.group(1)


@dataclass
class _Module:
    instrs: dict[str, _Instr] = field(default_factory=dict)
    entry: str | None = None
    users: dict[str, list[_Instr]] = field(default_factory=dict)
    fusions: dict[str, list[_Instr]] = field(default_factory=dict)  # fused computation -> its callers
    params: dict[tuple[str, int], str] = field(default_factory=dict)  # (computation, number) -> name
    frames: dict[int, tuple[tuple, int]] = field(default_factory=dict)  # id -> (location, parent id)


def _parse_hlo(text: str) -> _Module:
    """All instructions (fused and called computations included), indexed, with the stack frames."""
    mod, comp, section = _Module(), "", ""
    tables: dict[str, dict[int, str]] = {t: {} for t in _TABLES}
    for line in text.splitlines():
        if line in _TABLES:
            section = line
        elif section and (m := re.match(r"^(\d+) (.*)$", line)):
            tables[section][int(m.group(1))] = m.group(2)
        elif m := _COMP.match(line):
            comp, section = m.group(2), ""
            mod.entry = comp if m.group(1) else mod.entry
        elif m := _INSTR.match(line):
            rest, depth = m.group("rest"), 1
            for end, ch in enumerate(rest):  # noqa: B007 - the operand list ends at the matching parenthesis: ``end``
                depth += {"(": 1, ")": -1}.get(ch, 0)
                if depth == 0:
                    break
            attrs, kind = rest[end + 1:], m.group("type")
            op_name = re.search(r'metadata=\{[^}]*?op_name="([^"]*)"', attrs)
            frame = re.search(r"metadata=\{[^}]*?stack_frame_id=(\d+)", attrs)
            mod.instrs[m.group("name")] = _Instr(
                m.group("name"), comp, None if kind.startswith("(") else kind.split("[")[0], m.group("opcode"),
                re.findall(r"%([\w.\-]+)", rest[:end]), attrs, op_name and op_name.group(1),
                frame and int(frame.group(1)), bool(m.group(1)), line.strip())
    fields = {t: {i: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", row)} for i, row in tables[t].items()}
              for t in ("FileLocations", "StackFrames")}
    for fid, row in fields["StackFrames"].items():
        loc = fields["FileLocations"].get(row.get("file_location_id", 0), {})
        where = (tables["FileNames"].get(loc.get("file_name_id", 0), "").strip('"'), loc.get("line"),
                 loc.get("column"), loc.get("end_line"), loc.get("end_column"))
        mod.frames[fid] = (where, row.get("parent_frame_id", 1) - 1)  # the text prints the parent id + 1
    callers: dict[str, list[_Instr]] = {}  # ops in a computation reached by `call` are named after the call
    for i in mod.instrs.values():
        for o in dict.fromkeys(i.operands):
            mod.users.setdefault(o, []).append(i)
        if i.opcode == "fusion" and (c := i.attr("calls")):
            mod.fusions.setdefault(c, []).append(i)
        if i.opcode == "call" and (c := i.attr("to_apply")):
            callers.setdefault(c, []).append(i)
        if i.opcode == "parameter" and (k := re.search(r"parameter\((\d+)\)", i.line)):
            mod.params[(i.comp, int(k.group(1)))] = i.name

    def full_names(inst: _Instr, depth: int = 0) -> list[str]:
        outer = [n for c in callers.get(inst.comp, []) if depth < 64 for n in full_names(c, depth + 1)]
        return [f"{n}/{inst.op_name}" for n in outer] or [inst.op_name or ""]

    for i in mod.instrs.values():
        if i.op_name:
            at = mod.frames[i.frame][0] if i.frame is not None and i.frame in mod.frames else None
            i.keys = tuple((n, at) for n in full_names(i))
    return mod


def _stack(mod: _Module, frame: int | None) -> list[tuple]:
    """The source locations of a stack frame id, innermost first."""
    out: list[tuple] = []
    while frame in mod.frames and len(out) < 256:
        out.append(mod.frames[frame][0])
        frame = mod.frames[frame][1] if mod.frames[frame][1] != frame else None
    return out


def _users(mod: _Module, name: str) -> list[_Instr | str]:
    """The instructions that consume ``name``'s value, through fusion boundaries and moves."""
    found: list[_Instr | str] = []
    stack: list[tuple[str, int | None]] = [(name, None)]  # (instruction, tuple index it was put in)
    seen: set[tuple[str, int | None]] = set()
    while stack:
        if (item := stack.pop()) in seen:
            continue
        seen.add(item)
        n, index = item
        inst = mod.instrs[n]
        if inst.root:
            stack += [(f.name, index) for f in mod.fusions.get(inst.comp, [])]
            found += [_OUTPUT] if inst.comp == mod.entry else []
        for u in mod.users.get(n, []):
            if u.opcode == "fusion" and (c := u.attr("calls")):
                stack += [(mod.params[(c, k)], None) for k, o in enumerate(u.operands)
                          if o == n and (c, k) in mod.params]
            elif u.opcode == "tuple":
                stack += [(u.name, k) for k, o in enumerate(u.operands) if o == n]
            elif u.opcode == "get-tuple-element":
                stack += [(u.name, None)] if index is None or u.attr("index") == str(index) else []
            elif u.opcode in _MOVES:
                stack.append((u.name, index))
            else:
                found.append(u)
    return found


def _widened_in(mod: _Module, candidates: dict[Key, str]) -> dict[Key, _Instr]:
    """For each candidate op, a wider-typed instruction of it whose value leaves the op unrounded."""
    out: dict[Key, _Instr] = {}
    for inst in sorted(mod.instrs.values(), key=lambda i: i.opcode in _MOVES):  # computing ones first
        key = next((k for k in inst.keys if k in candidates), None)
        if key is None or key in out or inst.etype not in WIDE or inst.opcode in _NOT_EXAMINED:
            continue
        for u in _users(mod, inst.name):
            if isinstance(u, _Instr) and (u.opcode == "convert" and u.etype in NARROW or set(u.keys) & set(inst.keys)):
                continue  # rounded to a narrow type here, or an intermediate of the same op
            out[key] = inst
            break
    return out


# ---------------------------------------------------------------------------------------------
# The texts of one compile.

def _lower(fn: Callable[..., Any], args: tuple) -> Any:
    import jax
    return jax.jit(fn).lower(*args)


def lowered_stablehlo(fn: Callable[..., Any], args: tuple) -> str:
    """The StableHLO that ``jax.jit(fn)`` lowers to, with debug locations (``loc(...)``)."""
    return _lower(fn, args).as_text(debug_info=True)


def optimized_hlo(fn: Callable[..., Any], args: tuple, compiler_options: dict | None = None) -> str:
    """The optimized HLO that XLA compiles ``jax.jit(fn)`` to with these options."""
    return _lower(fn, args).compile(compiler_options=compiler_options).as_text()


def _unoptimized_hlo(lowered: Any) -> str | None:
    """The HLO XLA receives, with metadata (no public JAX API prints that, hence the guard)."""
    from ...jaxcompat import hlo_with_metadata

    return hlo_with_metadata(lowered)


@contextmanager
def _dumps(lowered: Any, compiler_options: dict | None, per_pass: bool) -> Iterator[list[tuple[str, Path]]]:
    """Compile into a temporary dump directory: ("before_optimizations", file), then (pass, file
    after it) for each pass that changed the module, in order. The directory is deleted on exit."""
    with tempfile.TemporaryDirectory(prefix="jaxparity-hlo-") as tmp:
        from ...jaxcompat import no_persistent_cache

        extra = {"xla_dump_to": tmp, **({"xla_dump_hlo_pass_re": ".*"} if per_pass else {})}
        with no_persistent_cache():  # a program loaded from JAX's cache is not compiled: no dumps
            lowered.compile(compiler_options={**(compiler_options or {}), **extra})
        first = sorted(Path(tmp).glob("module_*.before_optimizations.txt"))[:1]
        module = first[0].name.split(".")[0] + "." if first else ""
        steps = sorted((int(m.group(1)), m.group(2), p) for p in Path(tmp).glob(module + "*.txt")
                       if (m := re.match(r"[^.]+\.[^.]+\.(\d+)\.[^.]+\.after_([^.]+)", p.name)))
        yield [("before_optimizations", p) for p in first] + [(name, p) for _, name, p in steps]


def _source(frames: list[tuple]) -> str | None:
    """The innermost frame outside libraries (else the innermost) as ``file:line``."""
    paths = sysconfig.get_paths()
    libs = (paths["stdlib"], paths["purelib"], paths["platlib"], str(Path(__file__).parents[2]))  # jaxparity itself
    user = [f for f in frames if f[0] and not f[0].startswith(libs) and not f[0].startswith("<")]
    chosen = (user or frames or [()])[0]
    if not chosen:
        return None
    rel = os.path.relpath(chosen[0])
    return f"{os.path.basename(chosen[0]) if rel.startswith('..') else rel}:{chosen[1]}"


def compiler_evidence(fn: Callable[..., Any], args: tuple, *, compiler_options: dict | None = None,
                      path: str = "jit", passes: bool = True, optimized_text: str | None = None) -> CompilerEvidence:
    """List the declared bf16/f16 results that ``jax.jit(fn)`` compiled with ``compiler_options`` keeps wider.

    Reads the HLO XLA receives and the optimized HLO of the same compile; never runs the program.
    With ``passes``, compiles once more with per-pass dumps to name the pass that drops each rounding.
    ``optimized_text``: the optimized HLO of that very compile when the caller already has it.
    Kept in jaxparity's cache (the per-pass compile takes seconds and JAX's own cache cannot skip it):
    keyed by the program with its source locations, JAX's configuration, the options, ``XLA_FLAGS``,
    the versions, the CPU, this module's code and the working directory (sources are named relative
    to it).
    """
    import hashlib
    import json
    from dataclasses import asdict

    from ...cache import cache, fingerprint, machine, package_versions
    from ...jaxcompat import program_text
    from ...paths.staging import config_key

    lowered = _lower(fn, args)
    store = cache()
    if store is None:
        return _evidence(lowered, compiler_options, path, passes, optimized_text)
    key = fingerprint("compiler-evidence", program_text(lowered), repr(config_key()), compiler_options, path, passes,
                      os.environ.get("XLA_FLAGS", ""), package_versions(), machine(), os.getcwd(),
                      hashlib.sha256(Path(__file__).read_bytes()).hexdigest())

    def make(where: Path) -> dict[str, Any]:
        found = _evidence(lowered, compiler_options, path, passes, optimized_text)
        (where / "evidence.json").write_text(json.dumps(asdict(found)))
        return {}

    entry = store.fetch("compiler-evidence", key, make)
    data = json.loads((entry.dir / "evidence.json").read_text())
    notes = tuple(data["notes"])
    if entry.reused and entry.earlier:
        notes += (f"read from jaxparity's cache (entry {entry.short}: the same program, compile options and "
                  "versions; --no-cache compiles again)",)
    return CompilerEvidence(data["path"], tuple(WidenedResult(**w) for w in data["widened"]),
                            data["declared_narrow_ops"], notes)


def _evidence(lowered: Any, compiler_options: dict | None, path: str, passes: bool,
              optimized_text: str | None) -> CompilerEvidence:
    notes: list[str] = []
    if (declared_text := _unoptimized_hlo(lowered)) is None:
        with _dumps(lowered, compiler_options, per_pass=False) as files:
            declared_text = files[0][1].read_text() if files else ""
    declared: dict[Key, set[str]] = {}
    for inst in _parse_hlo(declared_text).instrs.values():  # ops that compute: moves cannot round
        if (inst.etype in NARROW or inst.etype in WIDE) and inst.opcode not in _NOT_EXAMINED | _MOVES:
            for key in inst.keys:
                declared.setdefault(key, set()).add(inst.etype)
    narrow = {k: sorted(t & NARROW.keys())[0] for k, t in declared.items() if t & NARROW.keys()}
    candidates = {k: t for k, t in narrow.items() if not declared[k] & WIDE.keys()}
    if ambiguous := sorted({k[0] for k in narrow.keys() - candidates.keys()}):
        notes.append("not checked, as the same op name and source location also declare wider results: "
                     + ", ".join(ambiguous))
    optimized = _parse_hlo(optimized_text or lowered.compile(compiler_options=compiler_options).as_text())
    widened = _widened_in(optimized, candidates)
    if missing := len(candidates.keys() - {k for i in optimized.instrs.values() for k in i.keys}):
        notes.append(f"{missing} narrow op(s) have no instruction of their own in the optimized HLO "
                     "(folded, or merged into other ops): not checked")
    removed: dict[Key, str] = {}
    if passes and widened:
        with _dumps(lowered, compiler_options, per_pass=True) as files:
            notes += [] if len(files) > 1 else ["XLA wrote no per-pass dumps: the removing pass is unknown"]
            for name, file in files[1:]:
                if not (todo := {k: candidates[k] for k in widened if k not in removed}):
                    break
                removed.update((k, name) for k in _widened_in(_parse_hlo(file.read_text()), todo))
    elif not passes:
        notes.append("no per-pass dumps requested (passes=False): the removing pass is not named")
    results = tuple(
        WidenedResult(primitive=key[0].rsplit("/", 1)[-1], declared_dtype=NARROW[candidates[key]],
                      computed_dtype=WIDE[str(inst.etype)], op_name=key[0], source=_source(_stack(optimized, inst.frame)),
                      hlo_line=inst.line[:240], removed_by_pass=removed.get(key))
        for key, inst in widened.items())
    return CompilerEvidence(path=path, widened=results, declared_narrow_ops=len(narrow), notes=tuple(notes))
