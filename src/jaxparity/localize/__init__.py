"""Localizing a divergence: per-op values of each path, and which ops go wrong on their own."""
