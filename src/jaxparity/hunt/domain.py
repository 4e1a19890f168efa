"""Where a hunt may look: a box per input leaf, stated by the user or derived from the example.

Every candidate input a hunt evaluates is projected into the domain first, and every input it reports
is checked to lie in it: nothing found outside the stated domain is reported as inside it. The
domain's bounds are values of each leaf's own dtype (a bound the dtype cannot hold is moved inward to
the nearest value it can), so a candidate cast to that dtype never leaves it.

``--domain`` items, comma-separated or repeated:

- ``NAME=LO:HI``   the leaf NAME (or every leaf under it: ``arg1`` covers ``arg1/...``) within [LO, HI];
                   LO and HI are numbers, or ``min``/``max`` (the dtype's finite extremes);
- ``NAME=ball:R``  within R of the example's own value, element by element (an L-infinity ball);
- ``ball=R``       the same for every varied float leaf;
- ``NAME=fixed``   kept as the example has it;  ``NAME=vary``  varied although the model's (or a mask);
- ``around=DIR``   balls (radius ``ball=R``, default a tenth of each leaf's spread) around each real input
                   in DIR (.npz / .safetensors, named like ``--inputs``): the domain is their union.

Without items, the domain is derived from the example, as ``--samples`` draws: the data's float
leaves within their example's range widened by half of it on each side (a one-signed leaf keeps its
sign: pixels stay non-negative), integer data within its example's range; the model's variables,
masks (0/1 integers too), position ids, keys and single-valued integers stay as they are.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..rounding import is_float_dtype
from .hazards import finfo

__all__ = ["Domain", "DomainError", "LeafDomain", "parse_domain"]


class DomainError(ValueError):
    """A ``--domain`` item that cannot be used (a usage error: exit 2)."""


@dataclass(frozen=True)
class LeafDomain:
    """One varied leaf: a box [lo, hi] (scalars), or a ball of ``radius`` around each center's value."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    lo: float | None = None
    hi: float | None = None
    radius: float | None = None
    why: str = ""

    @property
    def integer(self) -> bool:
        return np.dtype(self.dtype).kind in "biu"

    def describe(self) -> str:
        if self.radius is not None:
            return f"{self.name} within {self.radius:g} of {self.why}"
        return f"{self.name} in [{_g(self.lo)}, {_g(self.hi)}] ({self.why})"


@dataclass(frozen=True)
class Domain:
    """The varied leaves and the centers their balls are around (the example, or real inputs)."""

    leaves: tuple[LeafDomain, ...]
    centers: tuple[dict[str, np.ndarray], ...]  # the example's arrays, or each real input's
    fixed: tuple[str, ...] = ()  # the leaves kept as the example has them, with why
    source: str = "derived from the example"
    center_labels: tuple[str, ...] = ("the example",)
    _bounds: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def names(self) -> list[str]:
        return [leaf.name for leaf in self.leaves]

    def bounds(self, name: str, center: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Element-wise [lo, hi] of leaf ``name`` around center ``center``, as values of its dtype."""
        key = (name, center)
        if key not in self._bounds:
            leaf = next(x for x in self.leaves if x.name == name)
            dtype = np.dtype(leaf.dtype)
            if leaf.radius is not None:
                c = np.asarray(self.centers[center][name]).astype(np.float64)
                lo, hi = c - leaf.radius, c + leaf.radius
            else:
                lo, hi = np.full(leaf.shape, leaf.lo, np.float64), np.full(leaf.shape, leaf.hi, np.float64)
            lo, hi = _inward(lo, dtype, up=True), _inward(hi, dtype, up=False)
            self._bounds[key] = (lo, hi)
        return self._bounds[key]

    def project(self, arrays: dict[str, np.ndarray], center: int = 0) -> dict[str, np.ndarray]:
        """``arrays`` moved into the domain (element by element to the nearest bound), in each leaf's dtype;
        NaN becomes the center's value. Leaves the domain does not vary are dropped."""
        out = {}
        for leaf in self.leaves:
            lo, hi = self.bounds(leaf.name, center)
            x = np.asarray(arrays.get(leaf.name, self.centers[center][leaf.name])).astype(np.float64)
            x = np.where(np.isnan(x), np.asarray(self.centers[center][leaf.name]).astype(np.float64), x)
            if leaf.integer:
                x = np.round(x)
            x = np.clip(x, lo.astype(np.float64), hi.astype(np.float64))
            cast = x.astype(leaf.dtype)
            # a value rounded by the cast past a bound goes back to the bound (the bounds are the dtype's)
            wide = cast.astype(np.float64)
            cast = np.where(wide > hi.astype(np.float64), hi, np.where(wide < lo.astype(np.float64), lo, cast))
            out[leaf.name] = np.asarray(cast, dtype=leaf.dtype).reshape(leaf.shape)
        return out

    def contains(self, arrays: dict[str, np.ndarray]) -> int | None:
        """The center whose box holds every varied leaf of ``arrays`` (None: outside the domain)."""
        for k in range(len(self.centers)):
            if all(_within(np.asarray(arrays[leaf.name]), *self.bounds(leaf.name, k)) for leaf in self.leaves):
                return k
        return None

    def uniform(self, rng: np.random.Generator, center: int = 0) -> dict[str, np.ndarray]:
        """One input drawn uniformly from the box around ``center``: what random sampling of the domain
        draws (the hunt's own first guesses add the box's edges and magnitudes, ``search.edges``)."""
        out = {}
        for leaf in self.leaves:
            lo, hi = (b.astype(np.float64) for b in self.bounds(leaf.name, center))
            x: np.ndarray
            if leaf.integer:
                x = rng.integers(np.ceil(lo).astype(np.int64), np.floor(hi).astype(np.int64), endpoint=True)
            else:
                x = rng.uniform(lo, hi)
            out[leaf.name] = np.asarray(x).reshape(leaf.shape)
        return self.project(out, center)

    def describe(self) -> list[str]:
        lines = [leaf.describe() for leaf in self.leaves]
        if len(self.centers) > 1:
            lines.append(f"around each of {len(self.centers)} real inputs ({self.source})")
        return lines + [f"kept: {f}" for f in self.fixed]


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.6g}"


def _within(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    w = x.astype(np.float64)
    return bool(np.all((w >= lo.astype(np.float64)) & (w <= hi.astype(np.float64))))


def _inward(value: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    """``value`` as ``dtype``: the nearest value of the dtype at or above it (``up``) or at or below it,
    within the dtype's finite range."""
    value = np.asarray(value, np.float64)
    if dtype.kind in "biu":
        info = np.iinfo(dtype) if dtype.kind != "b" else None
        lo, hi = (0, 1) if info is None else (info.min, info.max)
        v = np.ceil(value) if up else np.floor(value)
        return np.clip(v, lo, hi).astype(dtype)
    top = float(finfo(dtype).max)
    v = np.clip(value, -top, top)
    cast = v.astype(dtype)
    wide = cast.astype(np.float64)
    off = (wide < v) if up else (wide > v)
    if off.any():
        cast = np.where(off, _step(cast, up), cast)
    return np.asarray(cast, dtype=dtype)


def _step(x: np.ndarray, up: bool) -> np.ndarray:
    """The next value of x's own dtype toward +inf (``up``) or -inf."""
    from ..metrics import _uint_view

    x = np.asarray(x)
    bits = _uint_view(x).astype(np.int64)
    nbits = x.dtype.itemsize * 8
    sign = (bits >> (nbits - 1)) & 1
    magnitude = bits & ((1 << (nbits - 1)) - 1)
    # toward +inf: a positive value's bits grow, a negative value's shrink (and -0 steps to the smallest positive)
    grow = (sign == 0) == up
    magnitude = np.where(grow, magnitude + 1, magnitude - 1)
    flip = magnitude < 0  # -0 going up, +0 going down: the smallest value of the other sign
    sign = np.where(flip, 1 - sign, sign)
    magnitude = np.where(flip, 1, magnitude)
    out = (sign << (nbits - 1)) | magnitude
    out = out.astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]).view(x.dtype)
    return out.reshape(x.shape)


# -- building a domain ---------------------------------------------------------------------------

def parse_domain(items: Sequence[str], example: dict[str, np.ndarray], varied: Collection[str]) -> Domain:
    """The domain ``items`` state (see the module's docstring) over the case's ``example`` inputs, whose
    leaves ``varied`` (``execution.samples.drawn_names``) vary by default."""
    words = [w.strip() for item in items for w in item.split(",") if w.strip()]
    radius: float | None = None
    around: str | None = None
    per_leaf: dict[str, tuple[str, str]] = {}  # name -> (kind, text)
    for word in words:
        key, eq, value = word.partition("=")
        if not eq or not value:
            raise DomainError(f"--domain {word!r}: write NAME=LO:HI, NAME=ball:R, ball=R, NAME=fixed, NAME=vary or "
                              "around=DIR")
        if key == "ball":
            radius = _number(value, word)
            if radius < 0:
                raise DomainError(f"--domain {word!r}: a radius must not be negative")
        elif key == "around":
            around = value
        else:
            names = [n for n in example if n == key or n.startswith(key + "/")]
            if not names:
                import difflib

                near = difflib.get_close_matches(key, list(example), 3)
                raise DomainError(f"--domain {word!r}: no input named {key!r}"
                                  + (f"; did you mean {' or '.join(near)}?" if near else
                                     f"; inputs are {', '.join(list(example)[:8])}"))
            for n in names:
                if n in per_leaf:
                    raise DomainError(f"--domain {word!r}: {n} is already given by --domain "
                                      f"{per_leaf[n][0]}={per_leaf[n][1]}; give each input once")
                per_leaf[n] = (key, value)
    centers: tuple[dict[str, np.ndarray], ...] = (example,)
    labels: tuple[str, ...] = ("the example",)
    source = "derived from the example" if not words else "stated: --domain " + ",".join(words)
    if around is not None:
        centers, labels = _real_inputs(around, example)
    leaves, fixed = [], []
    for name, x in example.items():
        x = np.asarray(x)
        kind, text = per_leaf.get(name, (None, ""))
        dtype = np.dtype(x.dtype)
        usable = x.size and (is_float_dtype(dtype) or dtype.kind in "biu")
        if text == "fixed" or not usable:
            if name in varied or text == "fixed":
                fixed.append(f"{name} (stated fixed)" if text == "fixed" else f"{name} ({dtype}: not varied)")
            continue
        if kind is None and name not in varied:
            continue  # the model's variables, masks, keys, single-valued integers: kept, as --samples keeps them
        shape = tuple(x.shape)
        if text in ("", "vary"):
            if around is not None or radius is not None and is_float_dtype(dtype):
                r = radius if radius is not None else _spread(x) / 10
                what = f"each real input's value ({labels[0]} ...)" if around else "the example's value"
                leaves.append(LeafDomain(name, str(dtype), shape, radius=r, why=what))
            else:
                lo, hi, why = _derived(x)
                leaves.append(LeafDomain(name, str(dtype), shape, lo, hi, why=why))
        elif text.startswith("ball:"):
            r = _number(text[5:], f"{kind}={text}")
            if r < 0:
                raise DomainError(f"--domain {kind}={text}: a radius must not be negative")
            leaves.append(LeafDomain(name, str(dtype), shape, radius=r, why="the example's value (stated)"))
        else:
            lo_text, colon, hi_text = text.partition(":")
            assert kind is not None  # a stated bound: the name is in per_leaf
            if not colon:
                raise DomainError(f"--domain {kind}={text}: write {kind}=LO:HI (numbers, min or max), "
                                  f"{kind}=ball:R, {kind}=fixed or {kind}=vary")
            lo, hi = _bound(lo_text, dtype, kind, text), _bound(hi_text, dtype, kind, text)
            if lo > hi:
                raise DomainError(f"--domain {kind}={text}: the low bound {lo:g} is above the high one {hi:g}")
            leaves.append(LeafDomain(name, str(dtype), shape, lo, hi, why="stated"))
    if not leaves:
        raise DomainError("the domain varies nothing: no input of the case is data that can be drawn; name one "
                          "with --domain NAME=LO:HI or NAME=vary")
    return Domain(tuple(leaves), centers, tuple(fixed), source, labels)


def _number(text: str, word: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise DomainError(f"--domain {word!r}: {text!r} is not a number") from None
    if not np.isfinite(x):
        raise DomainError(f"--domain {word!r}: {text!r} is not a finite number (the dtype's extremes are written "
                          "min and max)")
    return x


def _bound(text: str, dtype: np.dtype, key: str, value: str) -> float:
    if text in ("min", "max"):
        if dtype.kind in "biu":
            info = np.iinfo(dtype) if dtype.kind != "b" else None
            return float((0, 1)[text == "max"] if info is None else getattr(info, text))
        return float(finfo(dtype).max) * (1 if text == "max" else -1)
    x = _number(text, f"{key}={value}")
    top = float(np.iinfo(dtype).max if dtype.kind in "iu" else 1 if dtype.kind == "b" else finfo(dtype).max)
    if abs(x) > top:  # a bound the input cannot hold: every candidate would be moved to the dtype's extreme
        raise DomainError(f"--domain {key}={value}: {text} is beyond what {dtype} holds (largest {top:g}); write "
                          "min or max for the dtype's extremes")
    return x


def _spread(x: np.ndarray) -> float:
    w = x.astype(np.float64)
    w = w[np.isfinite(w)]
    if not w.size:
        return 1.0
    return float(w.max() - w.min()) or float(abs(w.max())) or 1.0


def _derived(x: np.ndarray) -> tuple[float, float, str]:
    """The box ``--samples``' draws mostly land in: the example's range widened by half of it each side,
    one-signed leaves keeping their sign; integers within the example's own range."""
    w = x.astype(np.float64)
    w = w[np.isfinite(w)]
    if x.dtype.kind in "biu":
        return float(w.min()), float(w.max()), "the example's range"
    if not w.size:
        return -1.0, 1.0, "no finite example value: [-1, 1]"
    mn, mx = float(w.min()), float(w.max())
    r = _spread(x)
    lo, hi = mn - r / 2, mx + r / 2
    if mn >= 0:
        lo = max(lo, 0.0)
    if mx <= 0:
        hi = min(hi, 0.0)
    return lo, hi, "the example's range, widened by half each side"


def _real_inputs(directory: str, example: dict[str, np.ndarray]) -> tuple[tuple[dict[str, np.ndarray], ...],
                                                                          tuple[str, ...]]:
    from ..arrayio import ArrayFileError
    from ..execution.samples import read_samples

    if not os.path.isdir(directory):
        raise DomainError(f"--domain around={directory}: not a directory of .npz or .safetensors inputs")
    try:
        files = read_samples(directory)
    except ArrayFileError as e:
        raise DomainError(f"--domain around={directory}: {e}") from None
    centers, labels = [], []
    for name, arrays in files:
        if arrays and all(k.startswith("arr_") for k in arrays) and not set(arrays) & set(example):
            names = list(example)
            arrays = {names[int(k[4:])]: v for k, v in arrays.items() if int(k[4:]) < len(names)}
        unknown = sorted(set(arrays) - set(example))
        if unknown:
            raise DomainError(f"--domain around={directory}: {name} has arrays {unknown} that match no input; "
                              f"inputs are {list(example)}")
        center = dict(example)
        for k, v in arrays.items():
            v = np.asarray(v)
            ref = np.asarray(example[k])
            if v.dtype.kind == "V" and v.dtype.itemsize == ref.dtype.itemsize:
                v = v.view(ref.dtype)
            if v.shape != ref.shape or v.dtype != ref.dtype:
                raise DomainError(f"--domain around={directory}: {name}: {k} is {v.dtype}{list(v.shape)}, the case "
                                  f"expects {ref.dtype}{list(ref.shape)}")
            center[k] = v
        centers.append(center)
        labels.append(name)
    return tuple(centers), tuple(labels)
