"""Keras 3 EfficientNetV2B0 (random weights, 96x96) under the mixed_bfloat16 policy, on the JAX backend, run as
served through `from_keras`: the model issue 54 timed (8 paths, 341 s and silent until its end).

    jaxparity explain benchmarks/models/keras_efficientnetv2.py --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported: Keras picks its backend once

import runpy  # noqa: E402
from pathlib import Path  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402

from jaxparity.cases import from_keras  # noqa: E402

with_batch_statistics = runpy.run_path(str(Path(__file__).parents[2] / "examples" / "keras_mobilenet.py"))[
    "with_batch_statistics"]


def make():
    keras.utils.set_random_seed(0)  # the same random weights in every process that loads the case
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = keras.applications.EfficientNetV2B0(input_shape=(96, 96, 3), weights=None,
                                                    include_preprocessing=False, classifier_activation=None)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    images = np.random.default_rng(0).uniform(-1, 1, (2, 96, 96, 3)).astype(np.float32)
    with_batch_statistics(model, images)  # as a trained model has its own (a fresh one's shrink the logits)
    return from_keras(model, images)
