"""The seed case's paths computed by hand, as the report's author did: the benchmark's yardstick.

eager, jit, export (serialize + deserialize), a jax2tf SavedModel served in a fresh TensorFlow
process (TF1 loader, tag 'serve', Session.run), the declared per-op rounding and the f64 ideal in
numpy. Prints the values; no comparison logic, no isolation, no report.
"""

import os
import subprocess
import sys
import tempfile

import jax
import ml_dtypes
import numpy as np
import tensorflow as tf
from jax import export
from jax.experimental import jax2tf

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import conv_bf16  # noqa: E402

fn, (variables, x) = conv_bf16.make()
with jax.disable_jit():
    eager = np.asarray(fn(variables, x))
jit = np.asarray(jax.jit(fn)(variables, x))
restored = export.deserialize(export.export(jax.jit(fn))(variables, x).serialize())
exported = np.asarray(restored.call(variables, x))

SERVE = """
import sys, numpy as np, tensorflow as tf
with tf.compat.v1.Session(graph=tf.Graph()) as s:
    meta = tf.compat.v1.saved_model.loader.load(s, ['serve'], sys.argv[1])
    sig = meta.signature_def['serving_default']
    feeds = {sig.inputs['k'].name: np.load(sys.argv[2]), sig.inputs['x'].name: np.load(sys.argv[3])}
    out = s.run(sig.outputs['y'].name, feed_dict=feeds)
print(out.ravel().tolist())
"""
with tempfile.TemporaryDirectory() as tmp:
    k = np.asarray(variables["params"]["Conv_0"]["kernel"])
    xs = np.asarray(x)
    f = tf.function(jax2tf.convert(lambda k, x: {"y": fn({"params": {"Conv_0": {"kernel": k}}}, x)}),
                    autograph=False, input_signature=[tf.TensorSpec(k.shape, tf.float32, name="k"),
                                                      tf.TensorSpec(xs.shape, tf.float32, name="x")])
    m = tf.Module()
    m.f = f
    tf.saved_model.save(m, tmp + "/m", signatures={"serving_default": f.get_concrete_function()})
    np.save(tmp + "/k.npy", k)
    np.save(tmp + "/x.npy", xs)
    served = subprocess.run([sys.executable, "-c", SERVE, tmp + "/m", tmp + "/k.npy", tmp + "/x.npy"],
                            capture_output=True, text=True, check=True).stdout.strip()

# declared: the bf16 product rounded to bf16, then the f32 add; f64: no rounding at all
kb = k.astype(ml_dtypes.bfloat16).astype(np.float64).ravel()
xb = xs.astype(ml_dtypes.bfloat16).astype(np.float64).ravel()
declared = ((kb * xb).astype(ml_dtypes.bfloat16).astype(np.float32) + xs.ravel()).astype(np.float32)
ideal = k.astype(np.float64).ravel() * xs.astype(np.float64).ravel() + xs.astype(np.float64).ravel()
for name, v in [("eager", eager), ("jit", jit), ("export", exported), ("savedmodel", served),
                ("declared", declared), ("f64", ideal)]:
    print(name, np.ravel(v) if not isinstance(v, str) else v)
