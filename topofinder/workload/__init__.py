"""Workloads: the α-β cost model (α, B, message sizes) and the ranking of a verified frontier
into the `search` document with its recommendation."""
