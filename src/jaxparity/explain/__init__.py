"""Explaining divergences: compiler evidence, candidate semantics, known causes, experiments."""
