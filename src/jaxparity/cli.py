"""The ``jaxparity`` command line. Exit codes: 0 agree, 1 a path does not agree, 2 usage or input error."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any, NoReturn

from ._version import __version__

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status

    from .execution.runs import PathRun


EXAMPLES = """\
examples:
  jaxparity compare examples/conv_bf16.py
  jaxparity compare model.py:make_small --paths eager,jit,savedmodel
  jaxparity compare model.py --paths jit:xla_allow_excess_precision=false,savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false
  jaxparity compare model.py --inputs logged_batch.safetensors --ulp 2 --json report.json
  jaxparity explain examples/conv_bf16.py --paths savedmodel --write-fixed conv_fixed.py
  jaxparity explain examples/conv_bf16.py:make_report_input --paths observed:tf_serving_outputs.npz
  jaxparity compare examples/conv_bf16.py --inputs-from old --paths eager@old,savedmodel@old:native_serialization=false,eager,savedmodel --env old="jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0"
  jaxparity compare model.py --env new="..." --env old="..." --export-env new --serve-env old
  jaxparity reduce examples/conv_bf16.py --paths eager,savedmodel -o repro.py --markdown
  jaxparity hunt model.py --paths eager,tflite --budget 512 --html hunt.html
  jaxparity compare model.py --paths eager,jit,jit:device=cpu          (on a TPU VM: the device against the host)
  jaxparity capture model.py --path jit -o tpu-run.npz                 (on the TPU VM; explain it anywhere:)
  jaxparity explain model.py --paths observed:tpu-run.npz --inputs tpu-run.npz
  jaxparity paths
  jaxparity cache --clear

exit status: 0 every path agrees with the baseline within tolerance (explain, with no tolerance given:
or differs by rounding noise only), 1 one does not (or failed; for explain: a divergence was found and
explained), 2 usage or input error (bad case file, unknown path or option, unreadable inputs).
"""

COMPARE_HELP = """\
Run CASE along several execution paths and compare each with the baseline path, element by
element: bitwise, ULP distance in the output's dtype, abs and rel error, NaN/inf agreement, and
each path's error against the float64 ideal (the f64 reference).

CASE is FILE.py or FILE.py:FACTORY; the factory (default: make) returns (fn, args).
Paths are written NAME or NAME:key=value,key=value (see `jaxparity paths`). Each path runs in a
worker process, so one that crashes or hangs (--timeout) is reported and the others still run.
"""


class _Parser(argparse.ArgumentParser):
    """argparse with "did you mean": a misspelled command or option gets the nearest names (exit 2)."""

    argv: Sequence[str] = ()  # what is parsed (``main`` sets it): which command's options to suggest

    def error(self, message: str) -> NoReturn:
        import difflib
        import re

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            names = re.findall(r"'([^']*)'", choice[2]) or [c.strip() for c in choice[2].split(",")]
            near = difflib.get_close_matches(choice[1], names, 2)
            if near:
                message += f"; did you mean {' or '.join(near)}?"
        unknown = re.search(r"unrecognized arguments: (.*)", message)
        if unknown:
            commands = {n: c for a in self._actions if isinstance(a, argparse._SubParsersAction)
                        for n, c in a.choices.items()}
            parser = next((commands[w] for w in self.argv if w in commands), self)  # the top parser reports
            options = [o for a in parser._actions for o in a.option_strings]
            for word in unknown[1].split():
                near = difflib.get_close_matches(word.split("=")[0], options, 2) if word.startswith("-") else []
                if near:
                    message += f"; {word}: did you mean {' or '.join(near)}?"
        super().error(message)


def _parser() -> _Parser:
    parser = _Parser(
        prog="jaxparity",
        description="Why does your JAX model give different numbers in production? Compare it across "
        "execution paths against its declared semantics.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"jaxparity {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    cmp = sub.add_parser("compare", help="compare a case across execution paths", description=COMPARE_HELP,
                         epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _compare_arguments(cmp)
    cmp.add_argument("--explain", action="store_true", help="also explain every diverging path (as `explain`)")
    exp = sub.add_parser("explain", help="compare, then say where, why and how to fix each divergence",
                         description=EXPLAIN_HELP, epilog=EXAMPLES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    _compare_arguments(exp)
    exp.add_argument("--write-fixed", metavar="OUT.py", help="write a case file whose model rounds where the "
                     "program declares (jaxparity.fixes.round_like_declared), when that fix is verified")
    exp.add_argument("--all-causes", action="store_true", help="as --verbose, and list every known cause, also "
                     "those not tested")

    cache = sub.add_parser("cache", help="where jaxparity's cache is and what it holds; --clear empties it",
                           description="jaxparity keeps converted models (SavedModel, TFLite, ONNX, IREE), JAX's "
                           "compiled programs and explain's compiler evidence in ~/.cache/jaxparity "
                           "($JAXPARITY_CACHE), and TensorFlow serving processes wait there for the next "
                           "command. This shows what is there.",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    cache.add_argument("--clear", action="store_true", help="remove every converted model and compiled program "
                       "and stop the serving processes (the environments of --env are kept)")
    cache.add_argument("--stop", action="store_true", help="stop the serving processes waiting for the next command")
    snap = sub.add_parser("snapshot", help="store inputs and every path's outputs as a baseline",
                          description="Run CASE along its paths and store a baseline in DIR: the inputs, each "
                          "path's outputs, package versions, platform and a content hash.",
                          formatter_class=argparse.RawDescriptionHelpFormatter, epilog=BASELINE_EXAMPLES)
    snap.add_argument("case", metavar="CASE")
    snap.add_argument("-o", "--out", required=True, metavar="DIR", help="directory for the baseline (new or empty)")
    snap.add_argument("--paths", action="append", metavar="P,P,...", help="as for compare")
    snap.add_argument("--inputs", metavar="FILE", help="as for compare")
    snap.add_argument("--env", action="append", default=[], metavar='ENV="PKG==VER ..."', help="as for compare")
    snap.add_argument("--force", action="store_true", help="replace an existing baseline in DIR")
    chk = sub.add_parser("check", help="re-run a baseline's paths and fail when one moved",
                         description="Re-run every path stored in the baseline DIR on its stored inputs and "
                         "compare with the stored outputs: exit 1 when a path moved beyond tolerance (after an "
                         "upgrade of JAX or TensorFlow, say), with what changed since the snapshot.",
                         formatter_class=argparse.RawDescriptionHelpFormatter, epilog=BASELINE_EXAMPLES)
    chk.add_argument("case", metavar="CASE")
    chk.add_argument("--against", required=True, metavar="DIR", help="the baseline directory")
    chk.add_argument("--ulp", type=int, metavar="N")
    chk.add_argument("--atol", type=float, metavar="X")
    chk.add_argument("--rtol", type=float, metavar="X")
    chk.add_argument("--env", action="append", default=[], metavar='ENV="PKG==VER ..."', help="as for compare")
    chk.add_argument("--in-env", metavar="ENV", help="run the stored paths in this --env (the versions you upgrade to)")
    chk.add_argument("--case-inputs", action="store_true",
                     help="run on the case's own inputs as they are now, not the snapshot's stored ones")
    chk.add_argument("--json", metavar="FILE", help="write the check as JSON")

    red = sub.add_parser("reduce", help="write a standalone, minimal script that reproduces one divergence",
                         description=REDUCE_HELP, epilog=REDUCE_EXAMPLES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    red.add_argument("case", metavar="CASE", help="FILE.py[:FACTORY] whose factory returns (fn, args)")
    red.add_argument("--paths", required=True, metavar="BASELINE,PATH",
                     help="the two paths: the one taken as right first (eager, jit, declared...), then the other")
    red.add_argument("-o", "--out", default="repro.py", metavar="FILE.py", help="the script (default repro.py); "
                     "large inputs go into FILE.npz beside it")
    red.add_argument("--markdown", nargs="?", const="", metavar="FILE.md", help="also write a bug-report draft "
                     "(default: the script's name with .md)")
    red.add_argument("--inputs", metavar="FILE", help="replace inputs by the arrays of an .npz or .safetensors file")
    red.add_argument("-q", "--quiet", action="store_true", help="print only the result line")

    cap = sub.add_parser("capture", help="run one path here (on this machine's device) and write its inputs, outputs "
                         "and every op's values to one file, to explain on another machine",
                         description="Run CASE along one path in this process, on the device it computes on (a "
                         "TPU VM's chip), and write a bundle: the inputs, the outputs, every op's values, the device "
                         "and the versions. On a machine without that device: jaxparity explain CASE --paths "
                         "observed:FILE --inputs FILE localizes and explains it against the host's baseline.",
                         epilog="example:\n  jaxparity capture model.py --path jit -o tpu-run.npz   (on the TPU VM)\n"
                         "  jaxparity explain model.py --paths observed:tpu-run.npz --inputs tpu-run.npz   "
                         "(anywhere)\n\nexit status: 0 written, 2 usage error or the path failed",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    cap.add_argument("case", metavar="CASE", help="FILE.py[:FACTORY] whose factory returns (fn, args)")
    cap.add_argument("--path", default="jit", metavar="SPEC", help="the path to run (default jit; eager, export, "
                     "jit:OPTIONS...)")
    cap.add_argument("-o", "--out", required=True, metavar="FILE", help="the bundle (.npz or .safetensors)")
    cap.add_argument("--inputs", metavar="FILE", help="replace inputs by the arrays of an .npz or .safetensors file")

    sw = sub.add_parser("sweep", help="run a matrix of cases x input sets x paths, locally or on a Ray cluster",
                        description=SWEEP_HELP, epilog=SWEEP_EXAMPLES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sw.add_argument("spec", metavar="SPEC.toml")
    sw.add_argument("--store", metavar="DIR", help="where results go (default: SPEC's name + .sweep); a sweep run "
                    "again on the same store resumes it")
    sw.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="local: a process pool on this machine (default); ray: one Ray task per cell")
    sw.add_argument("--address", metavar="ADDR", help="the Ray cluster to join (default: start one here)")
    sw.add_argument("--jobs", type=int, metavar="N", help="local worker processes (default: the number of cores)")
    sw.add_argument("--json", metavar="FILE", help="write the summary and every cell as JSON")
    sw.add_argument("--html", metavar="FILE", help="write the summary as a self-contained HTML page")
    sw.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

    hunt = sub.add_parser("hunt", help="search a domain of inputs for those on which two paths disagree most",
                          description=HUNT_HELP, epilog=HUNT_EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    hunt.add_argument("case", metavar="CASE", help="FILE.py[:FACTORY] whose factory returns (fn, args)")
    hunt.add_argument("--paths", required=True, metavar="BASELINE,PATH", help="the two paths: the one taken as "
                      "right first (eager, jit, f64...), then the other (jit, savedmodel, tflite, onnx, iree...)")
    stop = hunt.add_mutually_exclusive_group()
    stop.add_argument("--budget", type=int, default=256, metavar="N", help="inputs to evaluate, each on both paths "
                      "(default 256)")
    stop.add_argument("--time", type=float, metavar="S", help="search for S seconds instead (the number of "
                      "evaluations then depends on the machine)")
    hunt.add_argument("--domain", action="append", default=[], metavar="ITEM,...",
                      help="where to search: NAME=LO:HI, NAME=ball:R, ball=R, NAME=fixed, NAME=vary, around=DIR "
                      "(default: derived from the example: its range widened by half each side; see above)")
    hunt.add_argument("--seed", type=int, default=0, metavar="S", help="the search's seed (default 0): the same "
                      "seed and budget repeat the same search")
    hunt.add_argument("-o", "--out", metavar="DIR", help="where the worst input of each kind goes, as --inputs "
                      "files (default: hunt-CASE beside the case's name, in this directory)")
    hunt.add_argument("--explain", type=int, default=2, metavar="K", help="explain the K worst inputs as `explain "
                      "--inputs` would (default 2; 0: none)")
    scale = hunt.add_argument_group("a large budget: islands, each a search of its own seed, merged")
    scale.add_argument("--jobs", type=int, default=1, metavar="N", help="split the budget over N islands run at "
                       "once (default 1)")
    scale.add_argument("--executor", choices=("local", "ray"), default="local", help="local: a process pool on "
                       "this machine (default); ray: one Ray task per island (one per CPU of the cluster unless "
                       "--jobs says)")
    scale.add_argument("--address", metavar="ADDR", help="the Ray cluster to join (default: start one here)")
    tol = hunt.add_argument_group("tolerance: the gate (default: exact; an element passes if it meets any one given)")
    tol.add_argument("--ulp", type=int, metavar="N", help="at most N units in the last place of the output dtype")
    tol.add_argument("--atol", type=float, metavar="X", help="|got - expected| <= atol + rtol * |expected|")
    tol.add_argument("--rtol", type=float, metavar="X", help="see --atol")
    hunt.add_argument("--timeout", type=float, metavar="SECONDS", help="stop a path that runs longer than this on "
                      "one input")
    hunt.add_argument("--json", metavar="FILE", help="write the hunt as JSON ('-' for stdout)")
    hunt.add_argument("--html", metavar="FILE", help="write a self-contained HTML report, the search's progress "
                      "plotted")
    hunt.add_argument("-v", "--verbose", action="store_true", help="every kind of divergence found, not the worst "
                      f"{5}")
    hunt.add_argument("-q", "--quiet", action="store_true", help="print only the summary line")

    sub.add_parser("paths", help="list the execution paths, their options and whether they can run here")
    for command in (cmp, exp, snap, chk, red, sw, hunt):
        command.add_argument("--no-cache", action="store_true", help="convert and compile everything again: "
                             "no converted model or compiled program from jaxparity's cache (~/.cache/jaxparity, "
                             "$JAXPARITY_CACHE), none kept")
    return parser


SWEEP_HELP = """\
Run every cell of a matrix (each case x each input set x each path, compared with the baseline and,
with explain = true, explained when it diverges) as one task, on a local process pool or a Ray
cluster. Each finished cell goes straight into an append-only store (SQLite, arrays as safetensors):
interrupt the sweep and run it again, and it goes on from where it stopped. At the end: which cells
diverge, the worst ULP and the causes, per case and path.

SPEC.toml:
  name = "zoo"
  cases = ["examples/conv_bf16.py", "examples/mlp_bf16.py"]
  paths = ["jit", "savedmodel"]
  baseline = "eager"
  samples = 50          # input sets drawn like the example inputs (0: the example inputs only)
  explain = true
"""

SWEEP_EXAMPLES = """\
examples:
  jaxparity sweep zoo.toml --jobs 2 --html zoo.html
  jaxparity sweep zoo.toml --executor ray --address 10.0.0.5:6379 --json zoo.json

exit status: 0 no cell diverges, 1 a cell diverges or failed, 2 usage error or an unusable spec.
"""


HUNT_HELP = """\
Search a domain of the case's inputs for those on which PATH disagrees most with BASELINE, before the
model ships: each input is run on both paths (compiled once, many inputs per call) and ranked by how
far they part (a path failing, NaN or inf on one side, a jump, rounding). The first guesses aim at
the model's hazards: inputs driven by Newton steps until an op is at its threshold (floor, a
comparison, argmax ties), exp near overflow, subnormal inputs of log or a divisor, a periodic
function at large arguments, sums that cancel; and the domain's edges (its bounds, zero, subnormals,
the largest value). Then it mutates the worst inputs found. The worst input of each kind is written as
an --inputs file and explained. Nothing outside the domain is evaluated or reported.

The domain (--domain, comma-separated or repeated): NAME=LO:HI (LO, HI numbers or min/max of the
dtype), NAME=ball:R (within R of the example), ball=R (every varied float input), NAME=fixed,
NAME=vary (vary one that is kept: the model's variables, a mask), around=DIR (balls around real
inputs in DIR). NAME is an input as --inputs names it (arg1, arg0/params/...). Default: the data
inputs vary within their example's range widened by half each side (one-signed ones keep their
sign); the model's variables, masks, keys and single-valued integers stay as they are.
"""

HUNT_EXAMPLES = """\
examples:
  jaxparity hunt model.py --paths eager,tflite
  jaxparity hunt model.py --paths eager,jit --budget 2000 --domain arg1=-100:100 --html hunt.html
  jaxparity hunt model.py --paths f64,savedmodel --rtol 1e-3 --domain around=logged_inputs/,ball=0.01
  jaxparity hunt model.py --paths eager,iree --time 60 --json hunt.json

exit status: 0 no input in the domain breaks the tolerance (exact by default), 1 one does (its input is
written to --out), 2 usage or input error (an unknown path, a domain that cannot be used, a case that
cannot load or fails on its own inputs).
"""


REDUCE_HELP = """\
Localize the first op where PATH departs from BASELINE, cut the smallest region of ops around it that
still diverges when each side runs it alone (inside a loop: one iteration of its body), keep only the
elements that differ, and write it as a standalone script: the ops as JAX binds them, their captured
inputs bit for bit, the two computations, the versions. The script is run in a fresh process before
it is kept: it exits 1 while the divergence reproduces, 0 once it is gone (a regression test), 2 when
it fails; with --fixed it applies the fix the explanation verified and must exit 0.
"""

REDUCE_EXAMPLES = """\
examples:
  jaxparity reduce examples/conv_bf16.py --paths eager,savedmodel -o conv_repro.py --markdown
  jaxparity reduce model.py --paths eager,jit
  jaxparity reduce model.py:make_small --paths eager,tflite -o tflite_repro.py

exit status: 0 the script was written and reproduces in a fresh process, 1 no version of it reproduced
(nothing written), 2 usage or input error, or nothing to reduce (the paths agree).
"""


BASELINE_EXAMPLES = """\
examples:
  jaxparity snapshot examples/conv_bf16.py -o baselines/conv --paths eager,jit,savedmodel
  jaxparity check examples/conv_bf16.py --against baselines/conv
  jaxparity check examples/conv_bf16.py --against baselines/conv --in-env new --env new="jax==0.10.2 jaxlib==0.10.2"

exit status: 0 nothing moved beyond tolerance, 1 a path moved, 2 usage error or an unusable baseline.
"""


def _compare_arguments(cmp: argparse.ArgumentParser) -> None:
    cmp.add_argument("case", metavar="CASE", help="FILE.py[:FACTORY] whose factory returns (fn, args)")
    cmp.add_argument("--paths", action="append", metavar="P,P,...",
                     help="paths to run, comma-separated (default: eager,jit,export,savedmodel,declared,f64); "
                          "may be repeated")
    cmp.add_argument("--baseline", default="eager", metavar="PATH", help="path the others are compared with "
                     "(default: eager)")
    cmp.add_argument("--inputs", metavar="FILE", help="replace inputs by the arrays of an .npz or .safetensors "
                     "file, named like the inputs (arg1, arg0/params/...) or arr_0, arr_1...; bf16 bit-exact. "
                     "A DIR: many-inputs mode, one input set per .npz/.safetensors file in it (sorted)")
    many = cmp.add_argument_group("many inputs (each path compiled once, run on every sample; each path is "
                                  "shown on its worst sample, with aggregates)")
    many.add_argument("--samples", type=int, metavar="N", help="draw N input sets like the example inputs "
                      "(same shapes and dtypes) varying the data only, never the model's variables: floats normal "
                      "with the example's mean, std and sign; ints within the example's range; bools, PRNG "
                      "keys and single-valued ints unchanged")
    many.add_argument("--seed", type=int, default=0, metavar="S", help="seed for --samples (default 0); sample i "
                      "depends only on (S, i)")
    many.add_argument("--repeat", type=int, default=1, metavar="K", help="run each path K times per sample: "
                      "repeats that disagree are reported as nondeterminism, apart from divergence")
    many.add_argument("--save-worst", metavar="FILE.npz", help="write the worst sample's inputs (of the worst "
                      "gated path) as an --inputs file")
    tol = cmp.add_argument_group("tolerance (default: exact; an element passes if it meets any one given)")
    tol.add_argument("--ulp", type=int, metavar="N", help="at most N units in the last place of the output dtype")
    tol.add_argument("--atol", type=float, metavar="X", help="|got - expected| <= atol + rtol * |expected|")
    tol.add_argument("--rtol", type=float, metavar="X", help="see --atol")
    cmp.add_argument("-v", "--verbose", action="store_true", help="the report in full: the inputs, each path's own "
                     "line (its artifact, its runtime, the tolerance that would pass it), the values, every op that "
                     "departs on its own, how the difference grows layer by layer, compiler evidence, the candidate "
                     "semantics, each cause tested and each fix tried (the JSON and HTML always hold all of it)")
    cmp.add_argument("--timeout", type=float, metavar="SECONDS", help="stop a path that runs longer than this")
    cmp.add_argument("--budget", type=float, metavar="SECONDS", help="explaining: stop after this long (from the "
                     "start of the command) and report the verdicts decided so far, marked partial, as on Ctrl-C or "
                     "SIGTERM")
    cmp.add_argument("--max-capture-mb", type=float, metavar="MB", help="explaining: per-op values each path keeps "
                     "(in program order); beyond it an op's output is kept as a digest, compared bit for bit but not "
                     "replayed (default: no limit)")
    cmp.add_argument("--jobs", type=int, metavar="N", help="worker processes that run independent paths at the same "
                     "time (default: the number of cores; 1: one after the other); results are the same")
    env = cmp.add_argument_group("other package versions (paths written NAME@ENV run there)")
    env.add_argument("--env", action="append", default=[], metavar='ENV="PKG==VER ..."',
                     help="a virtual environment with these packages, created once and cached "
                          "(~/.cache/jaxparity/envs); may be repeated")
    env.add_argument("--inputs-from", metavar="ENV", help="draw the case's inputs in ENV (random streams differ "
                     "across JAX versions) and give them to every path bit-exactly (default: this environment)")
    env.add_argument("--export-env", metavar="ENV", help="with --serve-env: export a SavedModel in ENV ...")
    env.add_argument("--serve-env", metavar="ENV", help="... and serve it with ENV's TensorFlow: adds the path "
                     "savedmodel@EXPORT:serve_env=SERVE (artifact compatibility)")
    cmp.add_argument("--json", metavar="FILE", help="write the result as JSON (schema: docs/json-schema.md); "
                     "'-' for stdout")
    cmp.add_argument("--html", metavar="FILE", help="write a self-contained HTML report (works offline; attach it "
                     "to a bug report)")
    cmp.add_argument("--model-explorer", metavar="DIR", help="write the program as a Model Explorer graph and, "
                     "per explained path, its per-op error as node data (explain only)")
    cmp.add_argument("--in-process", action="store_true", help="run paths in this process: faster start, but a "
                     "path that crashes or hangs takes the run with it")
    cmp.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")


EXPLAIN_HELP = """\
Compare CASE along its paths (as `compare`), then explain each path that differs from the
baseline: the first ops whose own output is wrong given their own inputs (with the Flax module
and your source line), how the difference grows layer by layer, what the compiler did (optimized
HLO), which candidate semantics reproduce the numbers, and which known cause is behind it — each
cause confirmed or refuted by re-running an experiment — and the fixes, re-run to prove parity.

Paths can include observed:FILE.npz, outputs production logged, explained by fingerprint.
"""


def ensure_host_devices(specs: Sequence[str]) -> None:
    """A path sharded over N devices (``jit:mesh=8``) needs JAX started with N devices; on CPU that is
    ``--xla_force_host_platform_device_count``, read once when JAX starts: set it for this process and its
    workers while JAX is not started yet (an existing larger count is kept)."""
    import os
    import re

    wanted = max((int(m) for s in specs for m in re.findall(r"(?:^|[:,])mesh=(\d+)", s)), default=0)
    if wanted <= 1 or "jax" in sys.modules:
        return
    flags = os.environ.get("XLA_FLAGS", "")
    have = re.search(r"--xla_force_host_platform_device_count=(\d+)", flags)
    if have and int(have[1]) >= wanted:
        return
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags).strip()
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={wanted}".strip()


def main(argv: Sequence[str] | None = None) -> int:
    from .quiet import runtime_log

    parser = _parser()
    parser.argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    with runtime_log() as log, _command_env():
        code = _run(args, parser)
    if log is not None and log.lines():
        if code == 2:
            _note(log.describe())
        else:
            log.path.unlink()
    return code


@contextmanager
def _command_env() -> Iterator[None]:
    """What a command sets for itself and its workers (``--no-cache``, the serving process kept for the
    next command) set back as it was afterwards: ``main`` called from Python leaves the caller's alone."""
    import time

    from .cache.store import SINCE
    from .execution.runners import environ_kept

    with environ_kept("JAXPARITY_NO_CACHE", "JAXPARITY_SERVE_IDLE", SINCE):
        os.environ[SINCE] = repr(time.time())  # what its workers find in the cache made before it is reused
        yield


def _note(message: str) -> None:
    from rich.console import Console

    Console(stderr=True, highlight=False).print(f"[dim]{message}[/]", soft_wrap=True)


# Options naming a file the command writes: checked before any work, so that a typo in a directory does not
# cost the run (an explanation of minutes, then a traceback at the end).
_OUTPUT_FILES = ("json", "html", "write_fixed", "save_worst", "markdown")


def _unwritable(args: argparse.Namespace) -> str | None:
    """Why an output file of the command cannot be written (its directory missing or read-only), or None."""
    names = list(_OUTPUT_FILES) + (["out"] if args.command in ("reduce", "capture") else [])
    for name in names:
        value = getattr(args, name, None)
        if not isinstance(value, str) or value in ("", "-"):
            continue
        where = FsPath(value).parent
        flag = "-o/--out" if name == "out" else "--" + name.replace("_", "-")
        if not where.is_dir():
            return f"{flag} {value}: there is no directory {where}; create it first"
        if not os.access(where, os.W_OK):
            return f"{flag} {value}: the directory {where} cannot be written"
    return None


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if (why := _unwritable(args)) is not None:
        return _error(why)
    if getattr(args, "no_cache", False):
        from .cache import disable

        disable()  # this process and every worker it starts
    # The TensorFlow serving process stays for the next command (execution.warm.Daemon), 10 minutes idle.
    os.environ.setdefault("JAXPARITY_SERVE_IDLE", "600")
    if args.command in ("reduce", "capture", "hunt") or getattr(args, "in_process", False):
        from .cache import jax_cache

        jax_cache()  # this process compiles the case's programs: kept across commands, as a worker keeps them
    ensure_host_devices([p for p in (getattr(args, "paths", None) or []) if isinstance(p, str)]
                        if not isinstance(getattr(args, "paths", None), str) else [args.paths])
    if args.command in ("compare", "explain", "snapshot", "check"):
        from .execution.runners import host_only

        # The workers hold the accelerator; this process checks and reports on the host (unless it runs the
        # paths itself).
        with host_only() if not getattr(args, "in_process", False) else nullcontext():
            return _compare(args, parser) if args.command in ("compare", "explain") else _baseline(args)
    if args.command == "cache":
        return _cache(args)
    if args.command == "paths":
        return _list_paths()
    if args.command == "reduce":
        return _reduce(args)
    if args.command == "sweep":
        return _sweep(args)
    if args.command in ("snapshot", "check"):
        return _baseline(args)
    if args.command == "hunt":
        return _hunt(args)
    if args.command == "capture":
        return _capture(args)
    parser.print_help()
    return 2


def _error(message: str) -> int:
    from rich.console import Console
    from rich.text import Text

    # the message as written: no markup read in it ("[0, 1]"), no emoji made of it (":-1:" is a thumbs-down)
    Console(stderr=True, highlight=False, emoji=False).print(Text.assemble(("jaxparity: error:", "bold red"),
                                                                           " " + message), soft_wrap=True)
    return 2


def _compare(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:

    from .case import CaseError, load_case
    from .comparison import ExplainError, compare_case, compare_loaded, plan_paths
    from .execution.envs import EnvError, parse_env
    from .metrics import Tolerance
    from .paths import DEFAULT_PATHS, PathOptionError, spec_env
    from .report.terminal import stderr_console, stdout_console

    if args.ulp is not None and args.ulp < 0:
        return _error("--ulp must be a non-negative integer")
    if args.timeout is not None and args.timeout <= 0:
        return _error("--timeout must be a positive number of seconds")
    if getattr(args, "jobs", None) is not None and args.jobs < 1:
        return _error("--jobs must be at least 1")
    if getattr(args, "max_capture_mb", None) is not None:
        if args.max_capture_mb <= 0:
            return _error("--max-capture-mb must be a positive number of megabytes")
        import os

        os.environ["JAXPARITY_MAX_CAPTURE_MB"] = str(args.max_capture_mb)  # read where explain runs (the worker)
    tolerance = Tolerance(ulp=args.ulp, atol=args.atol, rtol=args.rtol)
    paths = ",".join(args.paths) if args.paths else None
    if bool(args.export_env) != bool(args.serve_env):
        return _error("--export-env and --serve-env go together")
    if args.export_env:
        compat = f"savedmodel@{args.export_env}:serve_env={args.serve_env}"
        paths = f"{paths or ','.join(DEFAULT_PATHS)},{compat}"
    try:
        envs = [parse_env(text) for text in args.env]
        specs, _ = plan_paths(paths, args.baseline)
    except EnvError as e:
        return _error(str(e))
    except PathOptionError as e:
        return _error(f"{e} (see `jaxparity paths`)")
    if any(spec_env(s) for s in specs) and args.in_process:
        return _error("paths in other environments (NAME@ENV) cannot run --in-process")
    if args.inputs and not FsPath(args.inputs).exists():
        return _error(f"--inputs {args.inputs}: no such file")
    if args.samples is not None or (args.inputs and FsPath(args.inputs).is_dir()):
        return _compare_many(args, paths, tolerance)
    if args.repeat != 1 or args.save_worst:
        return _error("--repeat and --save-worst go with --samples N or --inputs DIR")

    if args.budget is not None and args.budget <= 0:
        return _error("--budget must be a positive number of seconds")
    explain = args.command == "explain" or getattr(args, "explain", False)
    out = stdout_console()
    from .report.live import LiveReport

    progress = LiveReport(stderr_console(), quiet=args.quiet or args.json == "-")
    try:
        with _terminate_as_interrupt():
            if args.in_process:
                result = compare_loaded(load_case(args.case, args.inputs), paths=paths, baseline=args.baseline,
                                        tolerance=tolerance, timeout=args.timeout, progress=progress)
                result = result.explain() if explain else result
            else:
                result = compare_case(args.case, inputs=args.inputs, paths=paths, baseline=args.baseline,
                                      tolerance=tolerance, timeout=args.timeout, progress=progress, explain=explain,
                                      envs=envs, inputs_from=args.inputs_from, log=progress.log, jobs=args.jobs,
                                      stream=progress.stream, budget=args.budget)
    except (CaseError, ExplainError, EnvError) as e:
        progress.stop()
        return _error(str(e))
    except KeyboardInterrupt:
        progress.stop()
        return _error("interrupted before every path had run: nothing was compared") + 128
    finally:
        progress.stop()
    if getattr(args, "write_fixed", None):
        _write_fixed(args, result, out)

    _emit(args, result, out, progress.log)
    _switch_hint(args, result, out, parser)
    _warm_note(progress.log)
    return result.exit_code


def _warm_note(log: Any) -> None:
    """The serving processes this command leaves warm for the next one, bounded by count and memory, said on
    stderr with what they hold and how to stop them."""
    from .execution.warm import outlive, staying

    left = staying()
    if left:
        mb = sum(m for _, m in left)
        n = len(left)
        log(f"{n} TensorFlow serving process{'es' if n != 1 else ''} stay{'s' if n == 1 else ''} warm for the next "
            f"command ({mb:,.0f} MB; {'it leaves' if n == 1 else 'each leaves'} after {outlive():g} s idle): "
            "`jaxparity cache --stop` stops them")


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job's timeout, ``timeout``) handled as Ctrl-C: the verdicts decided so far are reported."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _switch_hint(args: argparse.Namespace, result: Any, out: Console, parser: Any) -> None:
    """After the report, the command that runs the paths a library's host callbacks stopped, with the library's
    switch set in its environment (``report.callbacks.switch_command``)."""
    from .report.callbacks import switch_command

    command = switch_command(result, getattr(parser, "argv", ()) or sys.argv[1:])
    if command is not None and args.json != "-":
        out.print(f"\nto run them with the switch that takes the host callbacks out (on every path alike):\n  {command}",
                  soft_wrap=True, markup=False)


def _emit(args: argparse.Namespace, result: Any, out: Console, log: Any) -> None:
    """Every output the user asked for: --html, --model-explorer, --json, then the terminal report."""
    from .report.terminal import print_result

    if getattr(args, "html", None):
        from .report.html import write_html

        write_html(result, args.html)
        log(f"wrote {args.html}")
    if getattr(args, "model_explorer", None):
        from .report.model_explorer import open_command, write_model_explorer

        try:
            files = write_model_explorer(result, args.model_explorer)
            log(f"wrote {len(files)} Model Explorer files to {args.model_explorer}; open them with:\n"
                f"  {open_command(files)}")
        except (ValueError, OSError) as e:
            log(f"--model-explorer: {e}")
    if args.json:
        text = result.to_json()
        if args.json == "-":
            sys.stdout.write(text + "\n")
        else:
            FsPath(args.json).write_text(text + "\n")
    if args.json != "-":
        if args.quiet:
            from .report.answer import headline
            from .report.format import summary_line

            # each verdict's sentence on a line of its own (a line or two: the paths that diverge, then the rest)
            out.print("\n".join(headline(result)) if result.verdicts else summary_line(result), markup=False)
        else:
            print_result(result, out, verbose=getattr(args, "verbose", False),
                         all_causes=getattr(args, "all_causes", False))


def _compare_many(args: argparse.Namespace, paths: str | None, tolerance: Any) -> int:
    """Many-inputs mode (--samples N or --inputs DIR)."""
    from rich.console import Console

    from .arrayio import ArrayFileError
    from .case import CaseError
    from .comparison import compare_samples
    from .report.terminal import stdout_console

    if args.samples is not None and args.samples < 1:
        return _error("--samples must be at least 1")
    if args.samples is not None and args.inputs:
        return _error("--samples draws inputs; --inputs DIR reads them: give one")
    if args.repeat < 1:
        return _error("--repeat must be at least 1")
    explain = args.command == "explain" or getattr(args, "explain", False)
    if args.in_process or args.env or args.export_env or args.inputs_from:
        return _error("many-inputs mode runs isolated, in this environment (no --in-process, --env)")
    quiet = args.quiet or args.json == "-"
    bar = _SampleBar(Console(stderr=True, highlight=False), quiet)
    try:
        result = compare_samples(args.case, samples=args.samples, seed=args.seed, inputs_dir=args.inputs,
                                 repeat=args.repeat, paths=paths, baseline=args.baseline, tolerance=tolerance,
                                 timeout=args.timeout, progress=bar)
    except (CaseError, ArrayFileError, ValueError) as e:
        bar.stop()
        return _error(str(e))
    bar.stop()
    if args.save_worst or explain:
        arrays, worst = _worst_inputs(args, result)
    if args.save_worst:
        from .arrayio import save_arrays

        save_arrays(args.save_worst, arrays)
        Console(stderr=True, highlight=False).print(f"[dim]wrote {args.save_worst}: {worst.samples.worst_label}, "
                                                    f"the worst for {worst.spec}[/]")
    if explain and any(not p.passed for p in result.paths if p.gated):
        result = _explain_worst(args, result, arrays, worst, paths, tolerance)
    _emit(args, result, stdout_console(), bar.log)
    return result.exit_code


def _worst_inputs(args: argparse.Namespace, result: Any) -> tuple[dict, Any]:
    """The inputs of the worst sample (of the worst gated path), and that path."""
    from .execution.samples import draw_sample, read_samples

    gated = [p for p in result.paths if p.samples and p.gated and p.spec != result.baseline] or \
        [p for p in result.paths if p.samples]
    worst = max(gated, key=lambda p: (not p.passed, p.samples.ulp_percentiles.get("100", 0)))
    i = worst.samples.worst_sample
    if args.inputs:
        return read_samples(args.inputs)[i][1], worst
    from .case import load_case
    from .pytree import argument_leaves, host

    case = load_case(args.case)
    example = {n: host(x) for n, x in argument_leaves(case.args)}
    return draw_sample(example, args.seed, i, case.data_leaves()), worst


def _explain_worst(args: argparse.Namespace, result: Any, arrays: dict, worst: Any, paths: str | None,
                   tolerance: Any) -> Any:
    """Explain the paths on the worst sample: the comparison re-run on those inputs, explained."""
    import dataclasses
    import tempfile

    from .arrayio import save_arrays
    from .comparison import compare_case

    with tempfile.TemporaryDirectory(prefix="jaxparity-worst-") as tmp:
        file = f"{tmp}/worst.npz"
        save_arrays(file, arrays)
        explained = compare_case(args.case, inputs=file, paths=paths, baseline=args.baseline, tolerance=tolerance,
                                 timeout=args.timeout, explain=True)
    note = f"explained on {worst.samples.worst_label}, the worst sample for {worst.spec}"
    found = tuple(dataclasses.replace(e, notes=(note, *e.notes)) for e in explained.explanations)
    from .explain.verdict import with_verdicts

    return with_verdicts(dataclasses.replace(result, explanations=found))


class _Feedback:
    """What a command tells the user on stderr while it runs; nothing with --quiet."""

    def __init__(self, console: Console, quiet: bool) -> None:
        self.console, self.quiet = console, quiet

    def log(self, message: str) -> None:
        from rich.markup import escape

        if not self.quiet:
            self.console.print(f"[dim]{escape(message)}[/]", soft_wrap=True)  # commands stay copyable


class _SampleBar(_Feedback):
    """A rich progress bar per path on stderr while it runs its samples."""

    def __init__(self, console: Console, quiet: bool) -> None:
        super().__init__(console, quiet)
        self.progress: Any = None

    def __call__(self, spec: str, done: int, total: int) -> None:
        if self.quiet:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if self.progress is None:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=self.console, transient=False)
            self.progress.start()
        if done == 0:
            self.task = self.progress.add_task(spec, total=total)
        self.progress.update(self.task, completed=done)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _baseline(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from rich.console import Console

    from .baseline import BaselineError, check, snapshot
    from .case import CaseError
    from .execution.envs import EnvError, parse_env
    from .metrics import Tolerance
    from .paths import PathOptionError
    from .report.terminal import stdout_console

    progress = _Progress(Console(stderr=True, highlight=False), quiet=False)
    try:
        envs = [parse_env(text) for text in args.env]
        if args.command == "snapshot":
            manifest = snapshot(args.case, args.out, paths=",".join(args.paths) if args.paths else None,
                                inputs=args.inputs, overwrite=args.force, envs=envs, progress=progress, log=progress.log)
            progress.stop()
            stdout_console().print(f"wrote baseline {args.out}: {len(manifest['paths'])} paths, content hash "
                                   f"{manifest['content_hash'][:16]}")
            return 0
        result = check(args.case, args.against, tolerance=Tolerance(args.ulp, args.atol, args.rtol),
                       in_env=args.in_env, case_inputs=args.case_inputs, envs=envs, progress=progress,
                       log=progress.log)
    except (BaselineError, CaseError, EnvError, PathOptionError) as e:
        progress.stop()
        return _error(str(e))
    progress.stop()
    from .report.check import print_check

    print_check(result, stdout_console())
    if args.json:
        from .result import _jsonable

        FsPath(args.json).write_text(json.dumps(_jsonable(dataclasses.asdict(result)) | {"passed": result.passed},
                                                indent=2))
    return result.exit_code


def _write_fixed(args: argparse.Namespace, result: Any, out: Console) -> None:
    from .fixes import write_fixed_case

    # write_fixed_case applies round_like_declared: only that model change's own verification stands for it
    verified = [f for e in result.explanations for f in e.fixes if f.kind == "model change" and f.verified
                and (f.spec or "").endswith("[fixed model]")]
    if not verified:
        searched = [f for e in result.explanations for f in e.fixes if f.kind == "model change" and f.verified
                    and getattr(f, "recipe", None)]
        if searched:  # a change the fix search found: the case with that change, applied where it was verified
            from .fixes.searched import write_searched_case

            write_searched_case(args.case, args.write_fixed, searched[0])
            out.print(f"wrote {args.write_fixed}: the case with {searched[0].description} (verified: "
                      f"{searched[0].evidence})", markup=False)
            return
        out.print(f"[yellow]--write-fixed: no verified model-side fix for this case; {args.write_fixed} not "
                  "written[/]")
        return
    flags = next((f.spec for e in result.explanations for f in e.fixes if f.kind == "serving flag" and f.verified),
                 None)
    write_fixed_case(args.case, args.write_fixed, serving_flags=flags)
    out.print(f"wrote {args.write_fixed}: the case with jaxparity.fixes.round_like_declared applied "
              f"(verified: {verified[0].evidence})")


class _Progress(_Feedback):
    """A spinner naming the running path, and a line per finished path, on stderr."""

    def __init__(self, console: Console, quiet: bool) -> None:
        super().__init__(console, quiet)
        self.status: Status | None = None

    def __call__(self, spec: str, run: PathRun | None) -> None:
        if self.quiet:
            return
        if run is None:
            self.status = self.console.status(f"running [bold]{spec}[/]…")
            self.status.start()
            return
        self.stop()
        mark = {"ok": "[green]✓[/]", "unavailable": "[dim]–[/]"}.get(run.status, "[red]✗[/]")
        extra = f" {run.status}" if run.status != "ok" else ""
        self.console.print(f"{mark} {spec} [dim]{run.seconds:.2f}s{extra}[/]")

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


def _reduce(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .case import CaseError, load_case
    from .comparison import _split_paths
    from .localize.region import RegionError
    from .paths import PathOptionError, make_path
    from .reduce import NotReproduced, ReduceError, reduce_case

    specs = _split_paths(args.paths)  # an option value may hold a comma (XLA_FLAGS=a,b)
    if len(specs) != 2:
        return _error(f"--paths takes two paths, BASELINE,PATH (got {args.paths!r})")
    if not args.out.endswith(".py"):
        return _error(f"-o {args.out}: the script's name must end in .py")
    err = Console(stderr=True, highlight=False)
    try:
        for spec in specs:
            make_path(spec)
        case = load_case(args.case, args.inputs)
    except PathOptionError as e:
        return _error(f"{e} (see `jaxparity paths`)")
    except CaseError as e:
        return _error(str(e))
    log = (lambda _: None) if args.quiet else (lambda m: err.print(f"[dim]{m}[/]"))
    name = FsPath(args.out).name
    try:
        red = reduce_case(case.fn, case.args, specs[0], specs[1], case_name=args.case, name=name, log=log)
    except NotReproduced as e:
        Console(stderr=True, highlight=False).print(f"[bold red]jaxparity reduce:[/] {e}", soft_wrap=True)
        return 1
    except ReduceError as e:
        return _error(str(e))
    except RegionError as e:
        return _error(str(e))
    except Exception as e:  # a defect of ours: say where, keep the exit status meaningful (not 1)
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-1]
        return _error(f"reduce failed in {where.name} ({FsPath(where.filename).name}:{where.lineno}): "
                      f"{type(e).__name__}: {e}; nothing was written")
    FsPath(args.out).write_text(red.script.text)
    written = [args.out]
    if red.script.sidecar:
        import numpy as np

        npz = str(FsPath(args.out).with_suffix(".npz"))
        np.savez(npz, **red.script.sidecar)  # type: ignore[arg-type]  # numpy's stub: a key might be allow_pickle
        written.append(npz)
    if args.markdown is not None:
        md = args.markdown or str(FsPath(args.out).with_suffix(".md"))
        FsPath(md).write_text(red.markdown)
        written.append(md)
    kept, of = red.elements
    fixed = ("; `--fixed` exits 0 (" + (red.script.fixed or "") + ")") if red.fixed_restores else ""
    Console(highlight=False, soft_wrap=True).print(
        f"wrote {', '.join(written)}: {red.where} in {len(red.region)} op{'s' if len(red.region) > 1 else ''} "
        f"({', '.join(red.region)}), {kept} of {of} elements, {red.script.code_lines} lines of code; it reproduces "
        f"in a fresh process (exit 1){fixed}.", markup=False)
    log(f"reduced in {red.seconds:.1f} s")  # progress, on stderr: the result line is the same under any load
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .report.terminal import stdout_console
    from .sweep import SpecError, Store, load_spec, run_sweep, summarize
    from .sweep.store import StoreError
    from .sweep.summary import print_summary, to_html, to_json

    if args.jobs is not None and args.jobs < 1:
        return _error("--jobs must be at least 1")
    try:
        spec = load_spec(args.spec)
        ensure_host_devices(spec.paths)
        store = Store(args.store or str(FsPath(args.spec).with_suffix(".sweep")), Store.spec_text(spec))
    except (SpecError, StoreError) as e:
        return _error(str(e))
    err = Console(stderr=True, highlight=False)
    from .sweep.summary import case_names

    names = case_names(spec.cases)  # two cases whose files share a name told apart

    def progress(done: int, total: int, cell: Any, record: dict) -> None:
        if not args.quiet:
            what = record.get("verdict") or record.get("status")
            err.print(f"[{done}/{total}] {names.get(cell.case, FsPath(cell.case).name)} input {cell.sample} "
                      f"{cell.path}: {what}", markup=False, soft_wrap=True)

    try:
        counts = run_sweep(spec, store, executor=args.executor, jobs=args.jobs, address=args.address,
                           progress=progress)
    except ValueError as e:
        return _error(str(e))
    summary = summarize(store, spec.name)
    if not args.quiet:
        restarts = counts["restarts"]
        err.print(f"{counts['ran']} cell{'s' if counts['ran'] != 1 else ''} run, {counts['skipped']} already in "
                  f"{store.dir}"
                  + (f", {restarts} worker restart{'s' if restarts > 1 else ''} (a worker died or hung; its "
                     "cell ran again or was recorded)" if restarts else ""), markup=False, soft_wrap=True)
    if args.json:
        FsPath(args.json).write_text(to_json(summary, store))
    if args.html:
        FsPath(args.html).write_text(to_html(summary))
    print_summary(summary, stdout_console())
    store.close()
    return 1 if summary.diverging or summary.failed or summary.hidden else 0


def _capture(args: argparse.Namespace) -> int:
    from .case import CaseError, load_case
    from .execution.capture import write_bundle
    from .paths import PathOptionError, make_path

    try:
        path = make_path(args.path)
        if path.env is not None or not path.replayable:
            return _error(f"--path {args.path}: capture runs a path of this process that computes op by op or "
                          "compiles with JAX (eager, jit, export); other runtimes run their own artifact")
        case = load_case(args.case, args.inputs)
    except (CaseError, PathOptionError, ValueError) as e:
        return _error(str(e))
    try:
        found = write_bundle(case, path.spec, args.out)
    except Exception as e:  # the path failed on this case: said, exit 2
        return _error(f"{args.path} failed on {case.name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    print(f"wrote {args.out}: {case.name} along {found.path} on {found.device} (jax {found.versions.get('jax')}): "
          f"{len(found.primitives)} ops, {len(found.values)} values captured; explain it anywhere with\n"
          f"  jaxparity explain {args.case} --paths observed:{args.out} --inputs {args.out}")
    return 0


def _hunt(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .case import CaseError
    from .hunt import hunt_case
    from .hunt.domain import DomainError
    from .hunt.report import progress_line, render_text, write_html
    from .metrics import Tolerance
    from .paths import PathOptionError

    if args.budget is not None and args.budget < 1:
        return _error("--budget must be at least 1")
    if args.time is not None and args.time <= 0:
        return _error("--time must be a positive number of seconds")
    if args.ulp is not None and args.ulp < 0:
        return _error("--ulp must be a non-negative integer")
    if args.jobs < 1:
        return _error("--jobs must be at least 1")
    err = Console(stderr=True, highlight=False)
    quiet = args.quiet or args.json == "-"
    budget = args.budget if args.time is None else 1 << 40
    out_dir = args.out or f"hunt-{FsPath(args.case.split(':', 1)[0]).stem}" + \
        (f"-{args.case.split(':', 1)[1]}" if ":" in args.case else "")

    def progress(what: str, value: Any) -> None:
        if quiet:
            return
        if what == "ready":
            domain, plan = value
            err.print(f"domain: {'; '.join(domain.describe())}", markup=False, soft_wrap=True)
            err.print(f"{len(plan.sites)} hazard sites to aim at", markup=False)
        elif what == "search":
            err.print(progress_line(value, args.budget if args.time is None else value.evaluations), markup=False)
        elif what == "explain":
            err.print(f"explaining evaluation {value.evaluation} ({value.kind})...", markup=False)
        elif what == "island":
            i, n, done = value
            err.print(f"island {i + 1} of {n}: {done.evaluations:,} evaluations, {len(done.findings)} kind"
                      f"{'s' if len(done.findings) != 1 else ''} of divergence", markup=False)

    try:
        result = hunt_case(args.case, paths=args.paths, budget=budget, seconds=args.time, domain=args.domain,
                           seed=args.seed, tolerance=Tolerance(ulp=args.ulp, atol=args.atol, rtol=args.rtol),
                           timeout=args.timeout, out_dir=out_dir, explain=args.explain, jobs=args.jobs,
                           executor=args.executor, address=args.address, progress=progress)
    except PathOptionError as e:
        return _error(f"{e} (see `jaxparity paths`)")
    except (CaseError, DomainError, ValueError) as e:
        return _error(str(e))
    if args.html:
        write_html(result, args.html)
        if not quiet:
            err.print(f"wrote {args.html}", markup=False)
    if args.json:
        if args.json == "-":
            sys.stdout.write(result.to_json() + "\n")
        else:
            FsPath(args.json).write_text(result.to_json() + "\n")
    if args.json != "-":
        print(result.summary() if args.quiet else render_text(result, verbose=args.verbose))
    return 0 if result.passed else 1


def _cache(args: argparse.Namespace) -> int:
    """Where the cache is, what it holds, the serving processes waiting; ``--clear`` empties it."""
    from .cache import root
    from .cache.store import Cache
    from .execution.warm import stop_daemons, waiting

    where = root()
    bound = int(float(os.environ.get("JAXPARITY_CACHE_MAX_MB", "4096")) * 2**20)
    store = Cache(where / "artifacts", bound, where / "jax")
    if args.clear:
        stopped = stop_daemons(where / "serve")
        store.clear()
        print(f"cleared {where} (converted models and compiled programs; {stopped} serving process"
              f"{'es' if stopped != 1 else ''} stopped; the environments of --env kept)")
        return 0
    if args.stop:
        stopped = stop_daemons(where / "serve")
        print(f"{stopped} serving process{'es' if stopped != 1 else ''} stopped")
        return 0
    mb = lambda n: f"{n / 2**20:,.1f} MB"  # noqa: E731
    kinds = store.by_kind()
    total = sum(b for _, b in kinds.values()) + store.jax_bytes()
    print(f"jaxparity's cache: {where} ({mb(total)} of {mb(bound)}, JAXPARITY_CACHE_MAX_MB; the entries read "
          "longest ago go first)")
    for kind, (n, size) in kinds.items():
        print(f"  {kind:20s} {n:4d} entr{'ies' if n != 1 else 'y'}  {mb(size):>12s}")
    print(f"  {'compiled programs':20s} {'':4s}         {mb(store.jax_bytes()):>12s}  (JAX's persistent cache, per CPU)")
    envs = where / "envs"
    if envs.is_dir():
        print(f"  {'environments':20s} {sum(1 for e in envs.iterdir() if e.is_dir()):4d}          never evicted "
              "(--env)")
    serving = waiting(where / "serve")
    print(f"serving processes waiting for the next command: {len(serving)}" +
          (f" (each leaves after {os.environ.get('JAXPARITY_SERVE_IDLE', '600')} s idle; --stop stops them)"
           if serving else ""))
    return 0


def _list_paths() -> int:
    from rich.console import Console
    from rich.table import Table

    from .paths import DEFAULT_PATHS, PATHS

    table = Table(show_edge=False, header_style="bold")
    for col in ("path", "what it runs", "options", "here"):
        table.add_column(col)
    for name, cls in PATHS.items():
        reason = cls().unavailable_reason()
        opts = "; ".join(f"{'KEY=...' if k == 'ENV' else 'any' if k == '*' else k}: {v}"
                         for k, v in cls.options_help.items())
        default = "" if name in DEFAULT_PATHS else " (not default)"
        table.add_row(name, cls.summary + default, opts, "[green]ok[/]" if not reason else f"[red]{reason}[/]")
    console = Console()
    console.print(table)
    console.print(_stack_line(), highlight=False)
    return 0


def _stack_line() -> str:
    """'jax 0.12.0.1 (tested: 0.4.38 to 0.12), jaxlib 0.12.0.1, numpy 2.5.5, Python 3.13.0': what runs here,
    with the warning where JAX is outside the tested range."""
    import platform

    from .versions import SUPPORTED_TEXT, installed, unsupported

    found = [f"{p} {v}" for p in ("jaxlib", "numpy", "ml_dtypes", "flax", "tensorflow-cpu", "tensorflow")
             if (v := installed(p))]
    line = (f"jax {installed('jax')} (tested: {SUPPORTED_TEXT}), " + ", ".join(found)
            + f", Python {platform.python_version()}")
    warning = unsupported()
    return line + (f"\n[red]{warning}[/]" if warning else "")


if __name__ == "__main__":
    sys.exit(main())
