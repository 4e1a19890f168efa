"""``observed:FILE``: outputs a production system logged, read from an .npz or .safetensors file.

Users often have only what production returned. The file's arrays are matched to the function's
outputs by name (``out``, ``out/logits``, ``out/0``) or, with numpy's default names, by order
(``arr_0``, ``arr_1``...); bf16 saved by plain ``np.savez`` (raw ``|V2``) is viewed, never converted.
Written ``observed:FILE`` (the option-less shorthand) or ``observed:file=FILE``.
"""

from __future__ import annotations

from typing import Any, Callable

from .base import Path, PathError


class ObservedPath(Path):
    name = "observed"
    summary = "outputs read from a file (what production logged), matched to the function's outputs"
    options_help = {"file": "the .npz or .safetensors file holding the outputs"}
    capabilities = frozenset({"observed"})
    traces = False
    stand_in = "savedmodel"  # production's outputs are most often a TensorFlow serving system's

    @property
    def spec(self) -> str:
        if set(self.options) == {"file"} and not self.env:
            return f"observed:{self.options['file']}"
        return super().spec

    @property
    def file(self) -> str:
        if "file" not in self.options:
            raise PathError("write observed:FILE.npz (or observed:file=FILE.npz)")
        return self.options["file"]

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax
        import numpy as np

        from ..arrayio import ArrayFileError, load_arrays
        from ..pytree import named_leaves

        try:
            arrays = load_arrays(self.file)
        except ArrayFileError as e:
            raise PathError(str(e)) from e
        shapes = jax.eval_shape(fn, *args)
        expected = named_leaves(shapes, "out")
        names = [n for n, _ in expected]
        if arrays and all(k.startswith("arr_") for k in arrays) and not set(arrays) & set(names):
            arrays = {names[int(k[4:])]: v for k, v in arrays.items() if int(k[4:]) < len(names)}
        missing = [n for n in names if n not in arrays]
        if missing:
            raise PathError(f"{self.file} has no array for {missing}; it has {sorted(arrays)}")
        leaves = []
        for name, aval in expected:
            got = arrays[name]
            if got.dtype.kind == "V" and got.dtype.itemsize == np.dtype(aval.dtype).itemsize:
                got = got.view(aval.dtype)
            if got.shape != aval.shape or got.dtype != aval.dtype:
                raise PathError(f"{self.file}: {name} is {got.dtype}{list(got.shape)}, "
                                f"the function returns {aval.dtype}{list(aval.shape)}")
            leaves.append(got)
        found = self.bundle()
        if found is not None:
            _same_inputs(self.file, args)
        self.notes.append(f"read from {self.file}" + (f" (captured along {found.path} on {found.device}, jax "
                                                      f"{found.versions.get('jax', '?')}: `jaxparity capture`)"
                                                      if found is not None else ""))
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), leaves)

    def bundle(self) -> Any:
        """The file's ``jaxparity capture`` bundle (``bundle.Bundle``), or None where it holds outputs only."""
        from ..arrayio import ArrayFileError
        from ..bundle import read_bundle

        if "_bundle" not in self.__dict__:  # read once per path: device(), run() and the per-op values all ask
            try:
                self.__dict__["_bundle"] = read_bundle(self.file)
            except (ArrayFileError, ValueError, KeyError):
                self.__dict__["_bundle"] = None
        return self.__dict__["_bundle"]

    def device(self) -> str:
        found = self.bundle() if "file" in self.options else None
        return found.device if found is not None else "cpu"

    def captured_values(self, program: Any) -> Any:
        """The bundle (``bundle.Bundle``) with its per-op values keyed by ``program``'s value ids (aligned where
        it was captured under another JAX: ``bundle.aligned_values``, said in the notes); None where the file
        holds outputs only. A bundle of another program is an error that says so."""
        import dataclasses

        import jax

        from ..bundle import aligned_values

        found = self.bundle()
        if found is None:
            return None
        try:
            values, note = aligned_values(found, program, jax.__version__)
        except ValueError as e:
            raise PathError(f"{self.file} was {e}: capture it again from this case") from None
        return dataclasses.replace(found, values=values, note=note)


def _same_inputs(file: str, args: tuple) -> None:
    """A bundle's outputs are of its own inputs: a case that draws other ones here (``jax.random`` gives other
    numbers on another device) is told to take the bundle's."""
    import numpy as np

    from ..arrayio import load_arrays
    from ..pytree import argument_leaves, host

    arrays = load_arrays(file)
    for name, x in argument_leaves(args):
        if name in arrays:
            mine, theirs = np.asarray(host(x)), arrays[name]
            if theirs.dtype.kind == "V" and theirs.dtype.itemsize == mine.dtype.itemsize:
                theirs = theirs.view(mine.dtype)
            if mine.shape != theirs.shape or mine.tobytes() != theirs.tobytes():
                raise PathError(f"{file} holds other inputs than this case's ({name} differs: drawn on another "
                                f"device, or another input set): explain it with --inputs {file}")
