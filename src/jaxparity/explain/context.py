"""What every stage after the capture reads: the case under explanation, both sides' outputs and per-op
values, and the re-runs of other paths and model changes (each run once, and kept)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..localize.localizer import Localization
from ..localize.program import FlatProgram
from ..localize.values import OpValues
from ..metrics import max_gaps
from ..paths import Path, make_path
from .measure import OUTCOMES, distance, narrowing, ulp_comparable
from .verdicts import Rerun

__all__ = ["Context", "describe", "first_line"]

Outputs = list[np.ndarray]


def first_line(e: BaseException) -> str:
    """The message's first line, and the next one where the first only introduces it ('...:')."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    return " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def describe(d: Any) -> str:
    """A divergence as the report names it: its loops, ``#index primitive`` and the user's line."""
    loops = "".join(f"{f.describe()}: " for f in d.within)
    return f"{loops}#{d.op.index} {d.op.primitive} ({d.op.user_source or d.op.source or 'unknown line'})"


@dataclass
class Context:
    fn: Callable[..., Any]
    args: tuple
    path: Path  # the path explained
    baseline: Path  # the path it is explained against
    path_out: Outputs
    base_out: Outputs
    device: str  # where the path computes ("cpu", "gpu", "tpu"): ``Path.device``
    program: FlatProgram
    dtypes: set[str]
    localization: Localization | None
    fingerprint: Any
    runs: dict[str, Outputs | str]  # spec -> outputs, or the error message
    base_vals: OpValues | None = None  # the baseline's per-op values of the case: a re-run is judged at the op it names
    flat_args: Sequence[Any] = ()
    # The model changes tried, by label ("fixed model": round_like_declared(fn)); a Fix's spec names one
    # as "PATH [LABEL]".
    models: dict[str, Callable[..., Any]] = dataclasses.field(default_factory=dict)
    path_vals: OpValues | None = None  # the path's per-op values of the case
    # Where those per-op values are not the program's (returning every intermediate changed the path's
    # outputs, so ``localization`` and ``path_vals`` are None): what they showed, kept for the causes the
    # runtime's own artifact decides (``mechanism.instrumented``).
    instrumented: tuple[Localization, OpValues] | None = None
    notes: list[str] = dataclasses.field(default_factory=list)  # what the experiments add to the report
    memo: dict[str, Any] = dataclasses.field(default_factory=dict)
    # The model changes re-run that computed ops in float32 (op indices, the change's label, its Rerun): the fix
    # search re-runs no op wider where one of them came no closer.
    widened: list[tuple[frozenset[int], str, Any]] = dataclasses.field(default_factory=list)
    ahead: dict[str, Any] = dataclasses.field(default_factory=dict)  # spec -> its re-run started ahead (a Future)

    def artifact(self) -> Any:
        """What the path's runtime really runs, read back (``Path.artifact``), once; None where the path has
        no artifact of its own or it cannot be read (then said in the notes)."""
        if "artifact" not in self.memo:
            from ..execution.crashes import attempt, crashed_before

            found, key = None, f"{self.path} [its artifact read back]"
            try:
                if (how := crashed_before(key)) is not None:
                    raise RuntimeError(f"reading it back {how.removeprefix('hung: ')} before; skipped")
                with attempt(key):  # a runtime that crashes or hangs running its own model costs this only
                    found = self.path.artifact(self.fn, self.args)
            except Exception as e:  # evidence, never a failure of the explanation
                self.notes.append(f"{self.path}'s artifact could not be read back ({first_line(e)})")
            if found is not None:
                self.notes.extend(found.notes)
            self.memo["artifact"] = found
        return self.memo["artifact"]

    def compare(self, mine: Sequence[np.ndarray], theirs: Sequence[np.ndarray]) -> Rerun:
        """A model change re-run on both sides: the path's and the baseline's outputs of the changed model,
        against the difference the two had before."""
        before = (*distance(self.path_out, self.base_out), max(max_gaps(self.path_out, self.base_out), default=0.0))
        after = (*distance(mine, theirs), max(max_gaps(mine, theirs), default=0.0))
        ulp = ulp_comparable((self.path_out, self.base_out), (mine, theirs))
        result = narrowing(before, after, distance(mine, self.path_out)[0] > 0, ulp)
        return Rerun(before, after, OUTCOMES[result], self.ideal_errors(mine, theirs), across_zero=not ulp)

    def measured(self, outs: Sequence[np.ndarray]) -> tuple[Rerun, str]:
        """The re-run ``outs`` of the path against the baseline, and the words of its judgement
        (``measure.narrowing``)."""
        before = (*distance(self.path_out, self.base_out), max(max_gaps(self.path_out, self.base_out), default=0.0))
        after = (*distance(outs, self.base_out), max(max_gaps(outs, self.base_out), default=0.0))
        ulp = ulp_comparable((self.path_out, self.base_out), (outs, self.base_out))
        result = narrowing(before, after, distance(outs, self.path_out)[0] > 0, ulp)
        return Rerun(before, after, OUTCOMES[result], self.ideal_errors(outs), across_zero=not ulp), result

    def seen(self, rerun: Rerun, spec: str, result: str = "", against: str = "differs in") -> str:
        """What a re-run ``spec`` showed, in one sentence: the path against the baseline before, and the
        re-run's outputs ``against`` the other side after, then the judgement ``result``."""
        before, after = rerun.before, rerun.after
        return (f"{self.path} differs from {self.baseline} in {before[0]} elements (max {before[1]} ULP, max abs "
                f"{before[2]:.3g}); {spec} {against} {after[0]} (max {after[1]} ULP, max abs {after[2]:.3g}){result}")

    def ideal_errors(self, mine: Sequence[np.ndarray], theirs: Sequence[np.ndarray] | None = None
                     ) -> tuple[float, float, float, float] | None:
        """Max abs error against the f64 ideal of the path before and after a re-run (``mine``), and of the
        baseline before and after (``theirs``; None: the baseline did not change). The ideal is the
        program's own: a fix rewrites how a value is rounded, not the math it means. None where the ideal
        cannot be computed or the outputs cannot be set against it."""
        ideal = self.run("f64")
        if isinstance(ideal, str) or len(ideal) != len(self.path_out):
            return None
        try:
            def worst(outs: Sequence[np.ndarray]) -> float:
                return max(max_gaps(outs, ideal), default=0.0)

            return (worst(self.path_out), worst(mine), worst(self.base_out),
                    worst(self.base_out if theirs is None else theirs))
        except Exception:  # noqa: BLE001 - shapes the ideal does not share: no such measure
            return None

    def run(self, spec: Path | str, fn: Callable[..., Any] | None = None, label: str = "fixed model"
            ) -> Outputs | str:
        """Outputs of ``spec`` (flattened), or why it failed; each distinct run happens once. ``fn``: a
        model change of the case's function, named ``label``."""
        from ..execution.crashes import attempt, crashed_before
        from ..execution.inprocess import run_in_process

        spec = str(spec)
        if fn is not None:
            self.models[label] = fn
        key = spec if fn is None else f"{spec} [{label}]"
        if key not in self.runs and (how := crashed_before(key)):
            self.runs[key] = (f"timeout: re-running {key} {how.removeprefix('hung: ')} (it was stopped; that re-run "
                              "is skipped)" if how.startswith("hung: ") else
                              f"crashed: re-running {key} {how} (its process died there; that re-run is skipped)")
        if key not in self.runs and key in self.ahead:
            with attempt(key):  # a re-run started ahead that hangs is named, as one run here would be
                self.runs[key] = self.ahead.pop(key).result()
        if key not in self.runs:
            with attempt(key):
                self.runs[key] = self._outputs(run_in_process(make_path(spec), fn or self.fn, self.args))
        return self.runs[key]

    @staticmethod
    def _outputs(r: Any) -> Outputs | str:
        return [a for _, a in r.outputs] if r.status == "ok" and r.outputs else f"{r.status}: {r.message}"

    def settle(self) -> None:
        """Wait for the re-runs started ahead that no experiment asked for (each under its breadcrumb)."""
        from ..execution.crashes import attempt

        for key in list(self.ahead):
            with attempt(key):
                self.runs[key] = self.ahead.pop(key).result()

    def run_ahead(self, paths: Sequence[Path], pool: Any) -> None:
        """Start the re-runs of ``paths`` now on ``pool``'s threads (paths that ``overlap``: each waits on a
        serving process of its own); ``run`` then waits for its result. Not under a crash breadcrumb: the
        run happens in that serving process, whose death is the run's failure, not this process's; ``run``
        and ``settle`` wait for it under one, so that one that hangs is named and skipped next time."""
        from ..execution.crashes import crashed_before
        from ..pytree import named_leaves, to_numpy

        def finish(served: Callable[[], Any]) -> Outputs | str:
            try:
                return [a for _, a in named_leaves(to_numpy(served()), "out")]
            except Exception as e:  # noqa: BLE001 - the re-run's failure, as ``run`` words it
                return f"error: {first_line(e)}"

        for path in paths:
            spec = path.spec
            if spec in self.runs or spec in self.ahead or crashed_before(spec):
                continue
            try:  # converted here, now: under the JAX configuration the case runs with
                served = path.start(self.fn, self.args)
            except Exception:  # noqa: BLE001 - ``run`` runs it again and says why it fails
                continue
            self.ahead[spec] = pool.submit(finish, served)
