"""``tflite``: the ``savedmodel`` path's SavedModel converted to TFLite and run by the LiteRT interpreter.

How the conversion works in this stack (jax 0.9.2, TensorFlow 2.21.0, ai-edge-litert 2.3.0):
jax2tf always emits one ``XlaCallModule`` op holding StableHLO (jax 0.9.2 ignores
``native_serialization=False`` and ``enable_xla=False``). ``tf.lite.TFLiteConverter.from_saved_model``
legalizes that StableHLO to TFLite's built-in ops by itself: float32 and integer models convert with
the default ``supported_ops`` (``TFLITE_BUILTINS``), no ``SELECT_TF_OPS`` (Flex) needed, and the
result runs on LiteRT's plain interpreter. bfloat16 and float16 models do not convert: TFLite's
built-in ops have no such kernels, and the converter says e.g. "failed to legalize operation
'tfl.batch_matmul' that was explicitly marked illegal" (``SELECT_TF_OPS`` gives the same error).
This path reports that as an error quoting the converter.

The interpreter runs in this process with LiteRT's default CPU delegate, XNNPACK, unless
``kernels=builtin`` (TFLite's own optimized kernels) or ``kernels=reference`` is asked for.
Different kernels sum in different orders: expect a few ulp of the largest magnitude from jit
(a float32 MLP: ``BATCH_MATMUL`` + ``ADD``, within 1-2 ulp of its largest output).
Conversion and interpretation run in this process, so ``timeout`` is left to the isolated runner.

``artifact`` reads the converted flatbuffer back (``paths.artifact``): its operators as TFLite runs
them (one AVERAGE_POOL_2D where JAX has a ``reduce_window`` sum and a division), its constants as the
converter stored them (-inf as -3.4028235e38), and every tensor's value in one run of that same model
with LiteRT's ``experimental_preserve_all_tensors`` (the served model's own intermediates, not those of
another conversion that returns them). The last conversion is kept per function and shapes, so a
run and the explanation that reads its artifact convert once.
"""

from __future__ import annotations

import re
import tempfile
import warnings
from collections.abc import Mapping
from typing import Any, Callable

from collections import OrderedDict

from .base import Path, PathError, PathOptionError, as_declared
from .savedmodel import SavedModelPath, _missing, _tail

# The last conversions: (id(fn), argument signature, Optimize.DEFAULT?) -> (fn, model bytes, notes).
_CONVERTED: OrderedDict[tuple, tuple[Any, bytes, list[str]]] = OrderedDict()

_KERNELS = {"xnnpack": "AUTO", "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "reference": "BUILTIN_REF"}
_OPTIMIZATIONS = ("none", "default")

# How a reproducer runs a function on TFLite (``Path.repro_runner``); ``{resolver}``: the kernel set.
_RUNNER = '''def run_tflite(f, args):  # jax2tf -> SavedModel -> TFLiteConverter -> LiteRT interpreter
    import tempfile
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from jax.experimental import jax2tf
    module = tf.Module()
    module.f = tf.function(lambda *xs: {{f"out{{i}}": y for i, y in enumerate(jax2tf.convert(f)(*xs))}},
                           input_signature=[tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=f"in{{i}}")
                                            for i, x in enumerate(args)], autograph=False)
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={{"serving_default": module.f.get_concrete_function()}})
        model = tf.lite.TFLiteConverter.from_saved_model(tmp).convert()
    runner = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.{resolver}
                         ).get_signature_runner("serving_default")
    out = runner(**{{f"in{{i}}": x for i, x in enumerate(args)}})
    return [np.asarray(out[f"out{{i}}"]) for i in range(len(out))]
'''


# A diagnostic's location ("/tmp/m.py:13:15: error:", "<unknown>:0: error:", "loc(...): error:") glued to the
# end of the converter's own sentence ("...to FlatBuffer./tmp/m.py:13:15: error: ..."): split it off there.
_GLUED = re.compile(r"(?<=[.:;!?)\]])(?=(?:/|[A-Za-z]:\\|<unknown>|loc\()[^\s]*?:\d+(?::\d+)?: error:)")


def _converter_lines(error: Exception) -> list[str]:
    """The converter's own error lines: its ``error:`` diagnostics (and its own sentence where a
    diagnostic is glued to it: "Could not translate MLIR to FlatBuffer." on a line of its own), else
    its structured errors."""
    text = str(error)
    found: list[str] = []
    for line in text.splitlines():
        pieces = [p.strip() for p in _GLUED.split(line) if p.strip()]
        glued = len(pieces) > 1
        found += [p for i, p in enumerate(pieces) if "error:" in p or (glued and i == 0)]
    lines = list(dict.fromkeys(found))
    if not lines:
        lines = list(dict.fromkeys(e.error_message for e in getattr(error, "errors", []) or [] if e.error_message))
    return [_short_paths(x) for x in lines] or [_tail(text) or type(error).__name__]


def _short_paths(line: str) -> str:
    """A library's file named from its package on ("flax/linen/linear.py":700:10), as the reports name
    every op's line: an installed file's whole path is too long to read, and breaks across lines."""
    import re

    return re.sub(r"/[^\s\"':]*?/(?:site|dist)-packages/", "", line)


def _narrow_float_dtypes(fn: Callable[..., Any], args: tuple) -> list[str]:
    """The 16-bit float dtypes (bfloat16, float16) that ``fn`` computes with, from its jaxpr."""
    import jax
    from jax.extend.core import ClosedJaxpr, Jaxpr

    found: set[str] = set()

    def visit(jaxpr: Any) -> None:
        for var in [*jaxpr.invars, *(v for eqn in jaxpr.eqns for v in eqn.outvars)]:
            dtype = getattr(var.aval, "dtype", None)
            if dtype is not None and jax.numpy.issubdtype(dtype, jax.numpy.floating) and dtype.itemsize == 2:
                found.add(str(dtype))
        for eqn in jaxpr.eqns:
            for p in eqn.params.values():
                for sub in p if isinstance(p, (tuple, list)) else [p]:
                    if isinstance(sub, ClosedJaxpr):
                        visit(sub.jaxpr)
                    elif isinstance(sub, Jaxpr):
                        visit(sub)

    try:
        visit(jax.make_jaxpr(fn)(*args).jaxpr)
    except Exception:  # only a hint: never hide the converter's message behind a tracing failure
        return []
    return sorted(found)


class TFLitePath(Path):
    name = "tflite"
    refuses_random = True
    summary = "the jax2tf SavedModel converted by TFLiteConverter and run by the LiteRT interpreter"
    options_help = {
        "keep": "a file to keep the converted model in (FILE.tflite)",
        "optimizations": "none (default) or default: the converter's Optimize.DEFAULT (quantizes constant weights)",
        "kernels": "xnnpack (default: LiteRT's default CPU delegate), builtin (TFLite's kernels, no delegate) "
        "or reference (TFLite's reference kernels)",
        "threads": "interpreter threads (default: LiteRT's choice)",
    }

    converter = "the TFLite converter"
    capabilities = frozenset({"other_compiler"})
    heavy = True
    cost = 1.5  # jax2tf and the TFLite converter
    distributions = ("tensorflow-cpu", "tensorflow", "ai-edge-litert")

    def repro_runner(self, extra: Mapping[str, str] | None = None) -> str | None:
        return _RUNNER.format(resolver=_KERNELS[self.repro_options(extra).get("kernels", "xnnpack")])

    @property
    def same_artifact(self) -> str | None:  # type: ignore[override]
        """TFLite's reference kernels run the same flatbuffer: where they give this path's values on an op,
        the conversion (or TFLite's own op), not XNNPACK's or the optimized kernel, is at fault."""
        return None if self.options.get("kernels") == "reference" else "tflite:kernels=reference"

    def alternatives(self) -> tuple[tuple[Path, str], ...]:
        """TFLite's other kernel sets: the built-in optimized kernels without XNNPACK, and the reference ones."""
        mine = self.options.get("kernels", "xnnpack")
        words = {"builtin": "run the interpreter with the built-in kernels, without the XNNPACK delegate "
                 "(experimental_op_resolver_type=BUILTIN_WITHOUT_DEFAULT_DELEGATES)",
                 "reference": "run the interpreter with the reference kernels (experimental_op_resolver_type="
                 "BUILTIN_REF; slower)"}
        return tuple((self.with_option("kernels", k), w) for k, w in words.items() if k != mine)

    def same_artifact_agrees(self, primitive: str, how: str) -> str:
        """Both of TFLite's kernel sets are TFLite's: agreeing, they show the op the converter chose, as TFLite
        defines it, not one kernel's bug."""
        return (f"both TFLite kernel sets compute it so: the TFLite op {self.converter} chose for "
                f"{primitive}, as TFLite defines it, not one kernel")

    def __init__(self, options: Any = None, **kwargs: Any) -> None:
        super().__init__(options, **kwargs)
        if self.options.get("kernels", "xnnpack") not in _KERNELS:
            raise PathOptionError(
                f"tflite: kernels must be one of {', '.join(_KERNELS)}, not {self.options['kernels']!r}"
            )
        if self.options.get("optimizations", "none") not in _OPTIMIZATIONS:
            raise PathOptionError(
                f"tflite: optimizations must be none or default, not {self.options['optimizations']!r}"
            )
        threads = self.options.get("threads")
        if threads is not None and not (threads.isdigit() and int(threads) > 0):
            raise PathOptionError(f"tflite: threads must be a positive integer, not {threads!r}")

    def unavailable_reason(self) -> str | None:
        if _missing("ai_edge_litert"):
            return "LiteRT is not installed: pip install 'jaxparity[tflite]' (ai-edge-litert)"
        if _missing("tensorflow"):
            return ("TensorFlow (the TFLite converter) is not installed: "
                    "pip install 'jaxparity[tensorflow]' (tensorflow-cpu)")
        return None

    def run(self, fn: Callable[..., Any], args: tuple, *, timeout: float | None = None) -> Any:
        import jax
        import numpy as np

        from ..pytree import host

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)  # Python scalars get JAX's dtypes
        model = self._model(fn, args)
        out_tree = jax.tree_util.tree_structure(jax.eval_shape(fn, *args))
        if self.options.get("keep"):
            with open(self.options["keep"], "wb") as f:
                f.write(model)
        inputs = {f"input_{i}": host(x) for i, x in enumerate(jax.tree_util.tree_leaves(args))}
        try:
            outputs = self._interpret(model, inputs)
        except PathError as e:
            from ..localize.refusals import kind_hint

            if (yours := kind_hint(fn, args, str(e))) is not None:  # the kernel the interpreter names, in your code
                raise PathError(f"{e}\n(the op the interpreter names, in your code: {yours})", e.fault) from e
            raise
        expected = jax.tree_util.tree_leaves(jax.eval_shape(fn, *args))
        flat = []
        for i, want in enumerate(expected):
            got = outputs.get(f"output_{i}")
            if got is None:
                raise PathError(f"the TFLite model has no output output_{i} (it has {', '.join(sorted(outputs))})")
            if got.dtype != want.dtype:
                raise PathError(f"TFLite returned output_{i} as {got.dtype}{list(np.shape(got))}; "
                                f"the function returns {want.dtype}{list(want.shape)}")
            flat.append(as_declared(got, want, f"TFLite's output_{i}", self.notes))  # 0-d come back as numpy scalars
        return jax.tree_util.tree_unflatten(out_tree, flat)

    def _model(self, fn: Callable[..., Any], args: tuple) -> bytes:
        """The TFLite model of ``fn`` on arguments shaped as ``args``: converted once per function, shapes
        and converter options (the last four are kept)."""
        from .staging import config_key, signature

        config = config_key()  # None where JAX does not expose it: convert every time
        key = (id(fn), signature(args), self.options.get("optimizations", "none"), config)
        hit = _CONVERTED.get(key) if config is not None else None
        if hit is not None and hit[0] is fn:
            _CONVERTED.move_to_end(key)
            self.notes.extend(hit[2])
            return hit[1]
        before = len(self.notes)
        model = self._converted(fn, args)
        _CONVERTED[key] = (fn, model, self.notes[before:])
        while len(_CONVERTED) > 4:
            _CONVERTED.popitem(last=False)
        return model

    def _converted(self, fn: Callable[..., Any], args: tuple) -> bytes:
        """The flatbuffer converted here from the very SavedModel the savedmodel path serves, or the one
        converted before from the same program, converter options and versions (the cache)."""
        from ..cache import cache, fingerprint, package_versions
        from .staging import staged

        def convert(where: str) -> bytes:
            saver = SavedModelPath()
            model_dir, _ = saver._saved(fn, args, where)
            self.notes.extend(saver.notes)
            return self._convert(model_dir, fn, args)

        store = cache()
        if store is None:
            with tempfile.TemporaryDirectory(prefix="jaxparity-tflite-") as tmp:
                return convert(tmp)
        stage, leaves = staged(fn, args)
        key = fingerprint("tflite", stage.program_key(leaves), self.options.get("optimizations", "none"),
                          package_versions("tensorflow", "tensorflow-cpu", "ai-edge-litert"))
        before = len(self.notes)

        def make(where: Any) -> dict[str, Any]:
            (where / "model.tflite").write_bytes(convert(str(where)))
            return {"notes": self.notes[before:]}

        entry = store.fetch("tflite", key, make)
        if entry.reused:
            self.notes.extend(entry.meta["notes"])
        if entry.reused and entry.earlier:
            self.notes.append(f"TFLite model reused from jaxparity's cache (entry {entry.short}: same program, "
                              "converter options and versions; --no-cache converts again)")
        return (entry.dir / "model.tflite").read_bytes()

    def artifact(self, fn: Callable[..., Any], args: tuple) -> Any:
        """The converted flatbuffer as TFLite runs it: its operators, its tensors (constants as stored) and
        every tensor's value in one run of this same model on ``args``, kept by LiteRT's
        ``experimental_preserve_all_tensors``."""
        import jax
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        from ..pytree import host
        from .artifact import Artifact, Kernel, Tensor

        args = jax.tree_util.tree_map(jax.numpy.asarray, args)
        model = self._model(fn, args)
        kernels = self.options.get("kernels", "xnnpack")
        try:
            with warnings.catch_warnings():  # "intended for debugging purposes only": this is debugging
                warnings.simplefilter("ignore", UserWarning)
                interpreter = Interpreter(model_content=model, experimental_preserve_all_tensors=True,
                                          experimental_op_resolver_type=OpResolverType[_KERNELS[kernels]])
            runner = interpreter.get_signature_runner("serving_default")
            wanted = runner.get_input_details()
            inputs = {f"input_{i}": host(x) for i, x in enumerate(jax.tree_util.tree_leaves(args))}
            runner(**{k: v for k, v in inputs.items() if k in wanted})
            out_index = {name: d["index"] for name, d in runner.get_output_details().items()}
            # Operators as the model stores them; the delegate's own DELEGATE nodes (XNNPACK's partitions
            # of those same operators) are left out.
            ops = [op for op in interpreter._get_ops_details() if op["op_name"] != "DELEGATE"]
            details = interpreter.get_tensor_details()
        except (RuntimeError, ValueError) as e:
            raise PathError(f"the LiteRT interpreter could not read the model back: {_tail(str(e))}") from e
        made = {int(t) for op in ops for t in op["outputs"]}
        fed = {d["index"] for d in wanted.values()}
        tensors: dict[int, Tensor] = {}
        values: dict[int, Any] = {}
        for d in details:
            i = d["index"]
            try:
                value = np.array(interpreter.get_tensor(i))
            except ValueError:  # a scratch tensor the kernels own: no value to read
                continue
            tensors[i] = Tensor(i, d["name"], tuple(int(n) for n in d["shape"]), np.dtype(d["dtype"]).name,
                                i not in made and i not in fed)
            values[i] = value
        outputs = tuple(out_index[f"output_{i}"] for i in range(len(out_index)))
        found = Artifact("the TFLite model", tuple(Kernel(op["index"], op["op_name"],
                                                          tuple(int(t) for t in op["inputs"]),
                                                          tuple(int(t) for t in op["outputs"])) for op in ops),
                         tensors, values, outputs)
        found.notes.append(f"read the TFLite model back: {len(ops)} operators "
                           f"({', '.join(sorted({op['op_name'] for op in ops}))}), {len(tensors)} tensors")
        return found

    def _convert(self, model_dir: str, fn: Callable[..., Any], args: tuple) -> bytes:
        import tensorflow as tf

        converter = tf.lite.TFLiteConverter.from_saved_model(model_dir, signature_keys=["serving_default"])
        optimize = self.options.get("optimizations", "none") == "default"
        if optimize:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        try:
            model = converter.convert()
        except Exception as e:
            message = "TFLite cannot convert this model: " + "\n".join(_converter_lines(e))
            from ..localize.refusals import line_hint, located_hint

            if (yours := located_hint(fn, args, message)) is not None:
                message += f"\n(the op the converter names, in your code: {yours})"
            elif (there := line_hint(fn, args, message)) is not None:  # no op of the kind it names at that line
                message += f"\n(the line the converter names: {there})"
            narrow = _narrow_float_dtypes(fn, args)
            if narrow:
                message += (f"\n(the model computes in {' and '.join(narrow)}; TFLite's built-in ops have no "
                            f"{' or '.join(narrow)} kernels: convert a float32 version of the model)")
            raise PathError(message) from e
        self.notes.append(
            f"converted by TensorFlow {tf.__version__}'s TFLiteConverter (built-in ops"
            f"{', Optimize.DEFAULT' if optimize else ''}): {len(model)} bytes"
        )
        return model

    def _interpret(self, model: bytes, inputs: dict) -> dict:
        import ai_edge_litert
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        kernels = self.options.get("kernels", "xnnpack")
        threads = int(self.options["threads"]) if self.options.get("threads") else None
        try:
            interpreter = Interpreter(model_content=model, num_threads=threads,
                                      experimental_op_resolver_type=OpResolverType[_KERNELS[kernels]])
            runner = interpreter.get_signature_runner("serving_default")
            wanted = runner.get_input_details()  # the converter drops inputs the model does not use
            outputs = runner(**{k: v for k, v in inputs.items() if k in wanted})
        except (RuntimeError, ValueError) as e:
            raise PathError(f"the LiteRT interpreter failed: {_tail(str(e))}") from e
        self.notes.append(
            f"run by the LiteRT {getattr(ai_edge_litert, '__version__', '?')} interpreter in this process "
            f"({kernels} kernels{f', threads={threads}' if threads else ''})"
        )
        return dict(outputs)
