"""Connectors shipped with connect-runtime (registered as entry points in pyproject.toml)."""
