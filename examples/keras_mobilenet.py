"""Keras 3 MobileNetV3Small (random weights, 96x96) computing in bfloat16 under the mixed_bfloat16 policy.

    jaxparity compare examples/keras_mobilenet.py --paths eager,jit

`from_keras` binds the model in and passes its variables as one input grouped by layer
(arg0/conv_bn/moving_variance...), run as served: training=False.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported: Keras picks its backend once

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from jaxparity.cases import from_keras  # noqa: E402


def make():
    keras.utils.set_random_seed(0)  # the same random weights in every process that loads the case
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = keras.applications.MobileNetV3Small(
            input_shape=(96, 96, 3), alpha=0.75, minimalistic=True, weights=None,
            include_preprocessing=False, classifier_activation=None)
    finally:
        keras.mixed_precision.set_global_policy("float32")  # the policy is global: leave it as it was
    images = np.random.default_rng(0).uniform(-1, 1, (4, 96, 96, 3)).astype(np.float32)
    with_batch_statistics(model, images)
    return from_keras(model, images[:1])


def with_batch_statistics(model, images):
    """The BatchNorm statistics of ``images`` in ``model``, as a trained model has its own: with a fresh
    BatchNorm's (mean 0, variance 1) random weights shrink the logits to 1e-9."""
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.0
    trained = [v.value for v in model.trainable_variables]
    kept = [v.value for v in model.non_trainable_variables]
    # One training-mode call, jitted (Keras's eager call runs op by op: 11 s of the example's 13).
    _, stats = jax.jit(lambda t, n, x: model.stateless_call(t, n, x, training=True))(trained, kept, images)
    for variable, value in zip(model.non_trainable_variables, stats):
        variable.assign(value)
