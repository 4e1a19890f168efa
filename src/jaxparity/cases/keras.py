"""A Keras 3 model (JAX backend) as a case: ``model.stateless_call`` with its variables by path."""

from __future__ import annotations

from typing import Any

from .model import ModelCase, named, nest, split_keywords, unnest, with_keywords, without_keywords

__all__ = ["from_keras"]

BACKEND_MESSAGE = ("from_keras needs Keras on its JAX backend; Keras is on {backend!r}: set "
                   "KERAS_BACKEND=jax before keras is first imported (os.environ['KERAS_BACKEND'] = 'jax' at the top "
                   "of the case file, before `import keras`)")


def from_keras(model: Any, *inputs: Any, **kwargs: Any) -> ModelCase:
    """``model.stateless_call(trainable, non_trainable, *inputs, training=False)[0]`` as
    ``(fn, (variables, *inputs))``: no dropout, batch statistics read, not updated.

    ``variables`` is every variable of the model, trainable or not, in a nested dict by ``variable.path``:
    ``{"conv": {"kernel": ...}, "conv_bn": {"gamma": ..., "moving_variance": ...}}``, named
    ``arg0/conv_bn/moving_variance``. A mixed-precision policy applies as in ``model(x)``: float32 variables,
    computed in the policy's dtype. Random-number state (a ``SeedGenerator``, unused with training=False) is
    bound in. Keyword arguments that are arrays (a mask) are a last input, a dict named by keyword; the others
    are bound in.
    """
    import keras

    if keras.backend.backend() != "jax":
        raise ValueError(BACKEND_MESSAGE.format(backend=keras.backend.backend()))
    arrays, static = split_keywords(kwargs)
    static.setdefault("training", False)
    trainable = [v.path for v in model.trainable_variables]
    non_trainable = [v.path for v in model.non_trainable_variables]
    if len(set(trainable + non_trainable)) < len(trainable) + len(non_trainable):
        raise ValueError(f"{model.name}: two variables share a path; give its layers unique names")
    seeds = {v.path: v.value for v in model.non_trainable_variables if _is_seed_state(v)}
    weights = {v.path: v.value for v in model.variables if v.path not in seeds}
    own = f"{model.name}/"  # a Sequential's paths start with its own name: the layers are what tell apart
    strip = all(p.startswith(own) for p in weights)
    weights = {p[len(own):] if strip else p: v for p, v in weights.items()}

    def fn(variables: Any, *inputs: Any) -> Any:
        by_path = {**{own + p if strip else p: v for p, v in unnest(variables).items()}, **seeds}
        positional, keywords = without_keywords(inputs, arrays)
        outputs, _ = model.stateless_call([by_path[p] for p in trainable], [by_path[p] for p in non_trainable],
                                          *positional, **static, **keywords)
        return outputs

    return ModelCase(named(fn, model.name), (nest(weights), *with_keywords(inputs, arrays)))


def _is_seed_state(variable: Any) -> bool:
    """The state of a ``keras.random.SeedGenerator`` (dropout's), not a weight."""
    return variable.name == "seed_generator_state" and "int" in str(variable.dtype)
