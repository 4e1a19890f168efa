"""Programs that serve an exported model in a fresh process, without JAX (run as scripts)."""
