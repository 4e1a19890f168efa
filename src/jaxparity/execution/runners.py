"""One isolated worker per Python environment, all fed the same inputs, bit for bit.

Paths written ``NAME@ENV`` run in a worker of environment ENV (see ``envs.py``); the others in a
worker of this one. Random streams differ across JAX versions, so inputs are drawn once, in this
environment or in the one named by ``inputs_from``, and handed to every other worker as a file.
"""

from __future__ import annotations

import dataclasses

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..arrayio import save_arrays
from ..case import CaseError
from .envs import EnvError, EnvSpec, ensure_env, manifest, register, worker_environment
from .isolated import IsolatedRunner
from .runs import CaseInfo, PathRun
from ..paths import make_path, spec_env

__all__ = ["Runners"]



# The JAX_PLATFORMS the command was started with, where the command's own process runs on the host only
# (``host_only``): its workers get it back.
_WORKER_PLATFORMS = "JAXPARITY_WORKER_JAX_PLATFORMS"


@contextmanager
def environ_kept(*names: str) -> Iterator[None]:
    """Environment variables ``names`` set back as they were when the block ends (a command's settings for itself
    and its workers, never left behind in a caller's process)."""
    before = {k: os.environ.get(k) for k in names}
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def host_only() -> Iterator[None]:
    """The command's own process computes on the host (``JAX_PLATFORMS=cpu``) while its workers get the
    platforms it was started with: one process at a time can hold a TPU, and the worker that runs the paths
    must be the one. Checking options, validating compile options and the references then never take the
    chip. Where JAX already started its backends in this process (``main`` called from a program that uses
    the chip), nothing changes for it, and the workers still get the platforms."""
    with environ_kept("JAX_PLATFORMS", _WORKER_PLATFORMS):
        if _WORKER_PLATFORMS not in os.environ:
            was = os.environ.get("JAX_PLATFORMS")
            os.environ[_WORKER_PLATFORMS] = was if was is not None else "<unset>"
            os.environ["JAX_PLATFORMS"] = "cpu"
        yield


def worker_platforms(variables: dict[str, str]) -> dict[str, str]:
    """``variables`` (a worker's environment) with the JAX_PLATFORMS the command was started with."""
    wanted = variables.pop(_WORKER_PLATFORMS, None)
    if wanted is None:
        return variables
    if wanted == "<unset>":
        variables.pop("JAX_PLATFORMS", None)
    else:
        variables["JAX_PLATFORMS"] = wanted
    return variables


class Runners:
    def __init__(self, case: str, inputs: str | None, envs: Sequence[EnvSpec] = (), inputs_from: str | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.case, self.user_inputs, self.inputs_from, self.log = case, inputs, inputs_from, log
        self.envs = {e.name: e for e in envs}
        if inputs_from is not None and inputs_from not in self.envs:
            raise EnvError(f"--inputs-from {inputs_from}: no such --env")
        self._vars = register(list(envs))
        self._runners: dict[str | None, IsolatedRunner] = {}
        self._failed: dict[str | None, str] = {}
        self._shared: str | None = None
        self._extra: dict[int, IsolatedRunner] = {}  # more workers of this environment (``lanes``)
        self.twins: list[IsolatedRunner] = []  # those whose inputs were found the first's bit for bit
        self._tmp = tempfile.TemporaryDirectory(prefix="jaxparity-inputs-")

    def check(self, specs: Sequence[str]) -> None:
        """Every environment a spec names must be declared (a usage error otherwise)."""
        for spec in specs:
            env = spec_env(spec)
            options = make_path(spec).options
            for name in filter(None, (env, options.get("serve_env"), options.get("load_env"))):
                if name not in self.envs:
                    raise EnvError(f"{spec}: no environment {name!r}; declare it with "
                                   f"--env {name}=\"package==version ...\"")

    def build(self, specs: Sequence[str]) -> None:
        """Create (once, cached) every environment the specs use; a failure is kept per environment."""
        names = {spec_env(s) for s in specs}
        for s in specs:
            names |= {make_path(s).options.get("serve_env"), make_path(s).options.get("load_env")}
        for name in sorted(filter(None, names)):
            try:
                ensure_env(self.envs[name], log=self.log)
            except EnvError as e:
                self._failed[name] = str(e)

    def load(self) -> CaseInfo:
        """Load the case where its inputs are drawn, and share those inputs with every other worker."""
        info = self._runner(self.inputs_from).load()
        if self.envs:
            arrays = self._runner(self.inputs_from).arrays()
            self._shared = os.path.join(self._tmp.name, "inputs.npz")
            save_arrays(self._shared, arrays)
        if self.inputs_from is not None:
            home = self._runner(None).load()  # this environment's description, the drawn inputs
            where = f"drawn in environment {self.envs[self.inputs_from].describe()}"
            return CaseInfo(home.name, home.source, f"{info.input_source}, {where}", home.inputs,
                            home.environment | {"inputs_from": self.inputs_from}, home.data, home.roles)
        return info

    def _runner(self, env: str | None) -> IsolatedRunner:
        if env not in self._runners:
            python, variables = None, worker_platforms(dict(os.environ)) | self._vars
            if env is not None:
                python, variables = str(self.envs[env].python), worker_platforms(worker_environment(self._vars))
            inputs = self.user_inputs if env == self.inputs_from else self._shared
            self._runners[env] = IsolatedRunner(self.case, inputs, python=python, env=variables)
        return self._runners[env]

    def run(self, spec: str, timeout: float | None) -> PathRun:
        env = spec_env(spec)
        if env in self._failed:
            return PathRun(spec, "error", message=self._failed[env])
        try:
            run = self._runner(env).run(spec, timeout)
        except CaseError as e:
            self._failed[env] = f"in environment {env}: {e}"
            return PathRun(spec, "error", message=self._failed[env])
        if env is None:
            return run
        return dataclasses.replace(run, notes=run.notes + (f"ran in environment {env}: {self.describe(env)}",))

    @property
    def home(self) -> IsolatedRunner:
        return self._runner(None)

    def worker(self, env: str | None) -> IsolatedRunner:
        """The worker of environment ``env`` (None: this one), loaded with the case and its shared inputs."""
        return self._runner(env)

    def packages(self, env: str) -> dict[str, str]:
        """{'jax': '0.4.38', ...}: the versions environment ``env`` was built with."""
        return dict(manifest(self.envs[env]).get("packages", {}))

    def describe(self, env: str) -> str:
        """'jax 0.4.38, jaxlib 0.4.38, …': what environment ``env`` runs."""
        return ", ".join(f"{k} {v}" for k, v in self.packages(env).items())

    # -- one comparison on several cores -----------------------------------------------------------
    def lanes(self, specs: Sequence[str], jobs: int) -> list[list[str]]:
        """The specs split into groups that run concurrently, each group in order in one worker: every
        other environment is its own group; in this one, the paths that convert and serve in another
        runtime (TensorFlow, TFLite, ONNX, IREE: seconds of imports and conversion each) are spread over
        up to ``jobs`` workers, JAX's own paths (the baseline first) staying in the first. Each converted
        path goes, costliest first (``Path.cost``), to the worker with the least to do so far (the first on a
        tie), so that the workers finish together; each worker starts as soon as it has loaded the case."""
        home = [s for s in specs if spec_env(s) is None]
        units = self.units(specs)
        heavy = {s for unit in units for s in unit}
        # One heavy path gains nothing from a second worker (it would import JAX again, on the same
        # cores): lanes only where heavy paths can overlap each other.
        n = max(1, min(jobs, len(units)))
        groups = [[s for s in home if s not in heavy]] + [[] for _ in range(1, n)]
        load = [sum(make_path(s).cost for s in groups[0])] + [0.0] * (n - 1)
        for unit in units:
            i = min(range(n), key=lambda i: (load[i], i != 0))
            groups[i] += unit
            load[i] += sum(make_path(s).cost for s in unit)
        order = {s: i for i, s in enumerate(specs)}
        groups = [sorted(g, key=order.__getitem__) for g in groups]
        for env in dict.fromkeys(spec_env(s) for s in specs if spec_env(s) is not None):
            groups.append([s for s in specs if spec_env(s) == env])
        return [g for g in groups if g]

    @staticmethod
    def units(specs: Sequence[str]) -> list[list[str]]:
        """The paths of this environment converted into another runtime (``Path.heavy``), costliest first
        (``Path.cost``; the specs' order in ties), as units that run in one worker: paths that run one
        converted artifact (onnx and onnx-ref: ``Path.same_artifact``) together, the second reusing the first's
        conversion there."""
        families: dict[str, list[str]] = {}
        for s in specs:
            path = make_path(s)
            if spec_env(s) is None and path.heavy:
                families.setdefault(min(path.name, path.same_artifact or path.name), []).append(s)
        return sorted(families.values(), key=lambda u: -sum(make_path(s).cost for s in u))

    def explain_lanes(self, specs: Sequence[str], backend: str | None) -> list[tuple[IsolatedRunner, list[str]]]:
        """The paths of this environment to explain (``specs``, in order) split over its workers, each group
        explained at the same time as the others: the paths XLA compiles (one may take another's explanation,
        ``explain.same``) and JAX's own in the first worker; those converted into another runtime, by family
        (``Path.same_artifact``), spread over the workers with the fewest, the twins first (``twins``: workers
        that ran beside the first on the same inputs). One worker where there is no twin, or where the
        baseline computes on an accelerator (a twin holds the host only)."""
        home = self.home
        if not self.twins or backend not in (None, "cpu"):
            return [(home, list(specs))]
        workers = [*self.twins, home]
        groups: dict[int, list[str]] = {id(w): [] for w in workers}
        units: dict[str, list[str]] = {}
        for s in specs:
            path = make_path(s)
            if not path.heavy or path.has("takes_xla_options"):
                groups[id(home)].append(s)
            else:
                units.setdefault(min(path.name, path.same_artifact or path.name), []).append(s)
        count = {id(w): 0 for w in workers}
        count[id(home)] = 1 if groups[id(home)] else 0
        for unit in units.values():
            w = min(workers, key=lambda w: count[id(w)])  # the first of the fewest: twins before the first worker
            groups[id(w)] += unit
            count[id(w)] += 1
        order = {s: i for i, s in enumerate(specs)}
        return [(w, sorted(groups[id(w)], key=order.__getitem__)) for w in [home, *self.twins] if groups[id(w)]]

    def extra_runner(self, lane: int) -> IsolatedRunner:
        """Another worker of this environment for lane ``lane``: it loads the case itself (at the same time
        as the first) and is used only if its inputs are the first worker's bit for bit."""
        if lane not in self._extra:
            # Heavy paths only (converted into another runtime): JAX there traces and converts, on the host; the
            # accelerator stays the first worker's (one process at a time can hold a TPU).
            variables = worker_platforms(dict(os.environ)) | {"JAX_PLATFORMS": "cpu"} | self._vars
            self._extra[lane] = IsolatedRunner(self.case, self.user_inputs, env=variables)
        return self._extra[lane]

    def stop(self) -> None:
        """End at once whatever every worker runs (an interrupt, a budget): their calls return "stopped"."""
        for runner in [*self._runners.values(), *self._extra.values()]:
            runner.stop()

    def close(self) -> None:
        for runner in [*self._runners.values(), *self._extra.values()]:
            runner.close()
        self._tmp.cleanup()

    def __enter__(self) -> Runners:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
