"""Batch work: sweeps of many (N, d) and the benchmark cases with their targets."""
