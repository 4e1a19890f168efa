"""Other package versions: virtual environments created once, cached, and reused.

``--env old="jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0"`` names a set of packages
(and, with ``python==3.13`` among them, the Python it runs on: JAX 0.11 and later need 3.12 or newer;
found on ``PATH`` as ``python3.13`` or among pyenv's versions); a path written ``eager@old`` then runs in
a worker process of that environment, with the same jaxparity code (put on its ``PYTHONPATH``) and inputs
moved bit-exactly. An environment lives in ``$JAXPARITY_CACHE`` (default ``~/.cache/jaxparity``) under
``envs/NAME-HASH``, where the hash covers the requirements and the Python version, so a changed spec
builds a new one and an unchanged spec is reused. It is built in a scratch directory and renamed into
place when complete, so an interrupted build is never mistaken for a finished one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EnvError", "EnvSpec", "cache_root", "ensure_env", "interpreter", "known_env", "parse_env", "register"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_MANIFEST = "jaxparity-env.json"
_RECIPE = 1  # bump when the way environments are built changes
_PYTHON = re.compile(r"^python(?:==?|)(3\.\d+)$")


class EnvError(Exception):
    """An environment cannot be parsed or built; the message names it and says why."""


@dataclass(frozen=True)
class EnvSpec:
    name: str
    requirements: tuple[str, ...]

    @property
    def python_version(self) -> str | None:
        """The Python asked for ("3.13" from ``python==3.13``), None: the one running jaxparity."""
        return next((m.group(1) for r in self.requirements if (m := _PYTHON.match(r))), None)

    @property
    def packages(self) -> tuple[str, ...]:
        """What pip installs: the requirements but the Python."""
        return tuple(r for r in self.requirements if not _PYTHON.match(r))

    @property
    def key(self) -> str:
        python = self.python_version or ".".join(map(str, sys.version_info[:2]))
        text = json.dumps([_RECIPE, tuple(int(p) for p in python.split(".")), sorted(self.packages)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def directory(self) -> Path:
        return cache_root() / "envs" / f"{self.name}-{self.key}"

    @property
    def python(self) -> Path:
        return self.directory / "bin" / "python"

    def describe(self) -> str:
        return f"{self.name} ({' '.join(self.requirements)})"


def parse_env(text: str) -> EnvSpec:
    """``'old=jax==0.4.38 jaxlib==0.4.38'`` -> EnvSpec('old', ('jax==0.4.38', 'jaxlib==0.4.38'))."""
    name, eq, reqs = text.partition("=")
    name = name.strip()
    if not eq or not _NAME.match(name) or not reqs.strip():
        raise EnvError(f"--env {text!r}: write NAME=\"package==version package==version ...\"")
    requirements = tuple(shlex.split(reqs.strip().strip("\"'")))
    return EnvSpec(name, requirements)


def cache_root() -> Path:
    from ..cache import root

    return root()


def interpreter(version: str | None) -> str:
    """The Python executable for ``version`` ("3.12"): this one where it matches or none is asked for, else
    ``python3.12`` on PATH, else pyenv's newest 3.12.x; an EnvError naming what to install otherwise."""
    if version is None or version == ".".join(map(str, sys.version_info[:2])):
        return sys.executable
    found = shutil.which(f"python{version}")
    if found:
        probe = subprocess.run([found, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
        if probe.returncode == 0:
            return found
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = sorted((d for d in root.glob(f"{version}.*") if (d / "bin" / f"python{version}").exists()),
                        key=lambda d: [int(x) if x.isdigit() else 0 for x in d.name.split(".")])
    if candidates:
        return str(candidates[-1] / "bin" / f"python{version}")
    raise EnvError(f"no Python {version} here (neither python{version} on PATH nor in pyenv's versions): install "
                   f"it, or drop python=={version} from the --env requirements")


def ensure_env(spec: EnvSpec, *, log: Callable[[str], None] | None = None, timeout: float = 1800) -> Path:
    """The environment's Python, building the environment first if it does not exist yet."""
    if (spec.directory / _MANIFEST).is_file() and spec.python.exists():
        return spec.python
    spec.directory.parent.mkdir(parents=True, exist_ok=True)
    scratch = spec.directory.with_name(f"{spec.directory.name}.building-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    if log:
        log(f"creating environment {spec.describe()} (once; cached in {spec.directory})")
    start = time.perf_counter()
    try:
        subprocess.run([interpreter(spec.python_version), "-m", "venv", str(scratch)], check=True,
                       capture_output=True, text=True)
        pip = [str(scratch / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        proc = subprocess.run(pip + list(spec.packages), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR") or "rror:" in ln]
            raise EnvError(f"environment {spec.name}: pip could not install {' '.join(spec.requirements)}:\n"
                           + "\n".join((errors or proc.stderr.strip().splitlines())[-4:]))
        versions = _versions(scratch / "bin" / "python")
        (scratch / _MANIFEST).write_text(json.dumps({"name": spec.name, "requirements": spec.requirements,
                                                     "python": _python_of(scratch / "bin" / "python"),
                                                     "packages": versions, "seconds": time.perf_counter() - start},
                                                    indent=1))
        if spec.directory.exists():  # another process finished first: keep theirs
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            os.rename(scratch, spec.directory)
    except subprocess.TimeoutExpired as e:
        raise EnvError(f"environment {spec.name}: installing took over {timeout:g} s") from e
    except subprocess.CalledProcessError as e:
        raise EnvError(f"environment {spec.name}: could not create a virtual environment: {e.stderr}") from e
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return spec.python


def manifest(spec: EnvSpec) -> dict:
    """What was installed in the environment (package versions, build time)."""
    try:
        return json.loads((spec.directory / _MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def _python_of(python: Path) -> str:
    proc = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "?"


def _versions(python: Path) -> dict[str, str]:
    code = ("import json\nfrom importlib import metadata\nout = {}\n"
            "for d in ('jax', 'jaxlib', 'flax', 'numpy', 'ml_dtypes', 'tensorflow-cpu', 'tensorflow'):\n"
            "    try: out[d] = metadata.version(d)\n    except Exception: pass\nprint(json.dumps(out))")
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def register(specs: list[EnvSpec]) -> dict[str, str]:
    """Environment variables that tell worker processes which --env names exist."""
    return {"JAXPARITY_ENVS": json.dumps({s.name: list(s.requirements) for s in specs})}


def known_env(name: str) -> EnvSpec:
    """The built environment called ``name`` (declared with --env in the command that runs this)."""
    known = json.loads(os.environ.get("JAXPARITY_ENVS", "{}"))
    if name not in known:
        raise EnvError(f"no environment {name!r}: declare it with --env {name}=\"package==version ...\"")
    spec = EnvSpec(name, tuple(known[name]))
    if not spec.python.exists():
        raise EnvError(f"environment {name!r} is not built yet ({spec.directory})")
    return spec


def worker_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables for a worker in another environment: jaxparity's own code on its path."""
    src = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env
