"""Benchmarks (not part of the test suite): ``bash bench/run.sh``."""
