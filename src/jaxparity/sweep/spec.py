"""The sweep's TOML: which cases, how many input sets, which paths against which baseline.

    name = "zoo"
    cases = ["examples/conv_bf16.py", "examples/mlp_bf16.py:make"]
    paths = ["jit", "savedmodel", "jit:xla_allow_excess_precision=false"]
    baseline = "eager"          # default
    samples = 50                # input sets drawn like the example inputs (0: the example inputs only)
    seed = 0
    explain = true              # localize and explain every diverging cell (first op, cause)
    timeout = 300               # seconds per path run
    [tolerance]                 # default exact
    ulp = 2
    [envs]                      # other package versions: paths written NAME@ENV run there
    old = "jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0"

Case files are relative to the spec's directory.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package (a declared dependency there)
    import tomli as tomllib

from ..metrics import Tolerance

__all__ = ["SpecError", "SweepSpec", "load_spec"]

_KEYS = {"name", "cases", "paths", "baseline", "samples", "seed", "explain", "timeout", "tolerance", "envs"}


class SpecError(ValueError):
    """The sweep spec cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class SweepSpec:
    name: str
    cases: tuple[str, ...]  # FILE.py[:FACTORY], absolute
    paths: tuple[str, ...]
    baseline: str = "eager"
    samples: int = 0
    seed: int = 0
    explain: bool = False
    timeout: float | None = None
    tolerance: Tolerance = Tolerance()
    envs: tuple = ()  # envs.EnvSpec, for paths written NAME@ENV

    @property
    def input_sets(self) -> tuple[int, ...]:
        """Sample indices; -1 is the case's own example inputs."""
        return tuple(range(self.samples)) if self.samples else (-1,)


def load_spec(file: str | Path) -> SweepSpec:
    from ..paths import PathOptionError, make_path

    file = Path(file)
    try:
        data = tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise SpecError(f"{file}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{file}: not valid TOML ({e})") from None
    unknown = set(data) - _KEYS
    if unknown:
        import difflib

        near = [f"{k}: did you mean {m[0]}?" for k in sorted(unknown) if (m := difflib.get_close_matches(k, _KEYS, 1))]
        raise SpecError(f"{file}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(sorted(unknown))} "
                        + (f"({'; '.join(near)} " if near else "(") + f"known: {', '.join(sorted(_KEYS))})")

    def listed(key: str) -> tuple[str, ...]:
        v = data.get(key)
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x.strip() for x in v):
            raise SpecError(f"{file}: {key} must be a non-empty list of strings")
        return tuple(x.strip() for x in v)

    cases = []
    for c in listed("cases"):
        name, _, factory = c.partition(":")
        path = (file.parent / name).resolve()
        if not path.exists():
            raise SpecError(f"{file}: case {c!r}: no file {path}")
        cases.append(f"{path}:{factory}" if factory else str(path))
    paths = listed("paths")
    baseline = data.get("baseline", "eager")
    from ..execution.envs import EnvError, parse_env
    from ..paths import spec_env

    table = data.get("envs", {})
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise SpecError(f'{file}: [envs] maps a name to its requirements: old = "jax==0.4.38 jaxlib==0.4.38"')
    try:
        envs = tuple(parse_env(f"{k}={v}") for k, v in table.items())
    except EnvError as e:
        raise SpecError(f"{file}: [envs]: {e}") from None
    names = {e.name for e in envs}
    for spec in (*paths, baseline):
        try:
            made = make_path(spec)
        except PathOptionError as e:
            raise SpecError(f"{file}: {e}") from None
        wanted = {w for w in (spec_env(spec), made.options.get("serve_env"), made.options.get("load_env"))
                  if w is not None}
        if wanted - names:
            raise SpecError(f"{file}: {spec}: no environment {sorted(wanted - names)[0]!r}; declare it under [envs]")
    if spec_env(baseline):
        raise SpecError(f"{file}: the baseline runs in this environment; compare other versions as paths")
    for key in ("samples", "seed"):
        if not isinstance(data.get(key, 0), int) or data.get(key, 0) < 0:
            raise SpecError(f"{file}: {key} must be a whole number >= 0")
    tol = data.get("tolerance", {})
    if not isinstance(tol, dict) or set(tol) - {"ulp", "atol", "rtol"}:
        raise SpecError(f"{file}: [tolerance] takes ulp, atol and rtol")
    timeout = data.get("timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise SpecError(f"{file}: timeout must be a positive number of seconds")
    return SweepSpec(str(data.get("name", file.stem)), tuple(cases), paths, baseline, int(data.get("samples", 0)),
                     int(data.get("seed", 0)), bool(data.get("explain", False)),
                     float(timeout) if timeout is not None else None, Tolerance(**tol), envs)
