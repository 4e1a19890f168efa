"""Models in, directly: a model of Flax (linen, NNX), Equinox, Keras 3, Haiku, Hugging Face Flax or NumPyro and its
example inputs as a case's ``(fn, args)``, its weights one input named by module path.

    def make():
        model = keras.applications.MobileNetV3Small(weights=None, input_shape=(96, 96, 3))
        return from_keras(model, images)

Each runs the model as served (no dropout, batch statistics frozen) and imports its library only when called.
"""

from .equinox import from_equinox as from_equinox
from .haiku import from_haiku as from_haiku
from .huggingface import from_hf as from_hf
from .keras import from_keras as from_keras
from .linen import from_flax as from_flax
from .model import ModelCase as ModelCase
from .nnx import from_nnx as from_nnx
from .numpyro import from_numpyro as from_numpyro

__all__ = ["ModelCase", "from_equinox", "from_flax", "from_haiku", "from_hf", "from_keras", "from_nnx", "from_numpyro"]
