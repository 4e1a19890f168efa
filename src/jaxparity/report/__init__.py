"""Reporters: each renders a ``ComparisonResult`` and nothing else."""
