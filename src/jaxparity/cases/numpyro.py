"""A NumPyro model as a case: its potential energy (the negative log-density in unconstrained space, what HMC and
NUTS compute), or its gradient, of the sites' unconstrained values, each site's log-probability under a name scope
of the site's own name, so a report names the site ("obs", "sigma") an op belongs to."""

from __future__ import annotations

from typing import Any

from .model import ModelCase, named

__all__ = ["from_numpyro"]


def _scoped_sites() -> Any:
    """A NumPyro handler that computes each sample site's ``log_prob`` under ``jax.named_scope(site name)``."""
    import jax
    from numpyro.primitives import Messenger

    class ScopedSites(Messenger):  # type: ignore[misc]
        def process_message(self, msg: dict) -> None:
            fn, name = msg.get("fn"), msg.get("name")
            if msg.get("type") != "sample" or fn is None or not hasattr(fn, "log_prob"):
                return
            log_prob = fn.log_prob

            def scoped(value: Any, *args: Any, **kwargs: Any) -> Any:
                with jax.named_scope(str(name)):
                    return log_prob(value, *args, **kwargs)

            try:
                object.__setattr__(fn, "log_prob", scoped)
            except (AttributeError, TypeError):  # a distribution that takes no attribute: its ops go unnamed
                pass

    return ScopedSites


def from_numpyro(model: Any, *model_args: Any, params: Any = None, grad: bool = False, seed: int = 0,
                 **model_kwargs: Any) -> ModelCase:
    """``potential(params)`` (``grad``: its gradient, a dict by site) as ``(fn, (params,))``, ``params`` the
    sites' unconstrained values (default: NumPyro's initial ones, drawn with ``seed``), named ``arg0/<site>``.
    Each site's log-probability is computed under a name scope of its name: a carrier reads "in obs"."""
    import jax
    from numpyro.infer.util import initialize_model

    scoped = _scoped_sites()

    def site_scoped(*args: Any, **kwargs: Any) -> Any:
        with scoped():
            return model(*args, **kwargs)

    info = initialize_model(jax.random.PRNGKey(seed), site_scoped, model_args=model_args, model_kwargs=model_kwargs)
    potential = info.potential_fn
    start = info.param_info.z if params is None else params
    fn = jax.grad(potential) if grad else potential
    name = getattr(model, "__qualname__", "model")
    return ModelCase(named(lambda params: fn(params), f"{name}.{'grad_' if grad else ''}potential"), (start,))
