"""Keras 3 MobileNetV3Small (random weights, 96x96) under the mixed_bfloat16 policy, on the JAX backend.

    jaxparity explain benchmarks/models/keras_mobilenetv3.py --paths eager,jit,export,savedmodel,tflite,onnx,onnx-ref,iree

The model is examples/keras_mobilenet.py's, run as served through `from_keras`.
"""

import runpy
from pathlib import Path

make = runpy.run_path(str(Path(__file__).parents[2] / "examples" / "keras_mobilenet.py"))["make"]
