"""Command-line tools that are not the worker itself (tail, verify)."""
