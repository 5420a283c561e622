"""Scoring a topology: the BFB schedule and its exact (T_L, τ) (paper 001 §6, LP (1)),
ForestColl's throughput optimum and tree packing (paper 002), the all-to-all maximum concurrent
flow (paper 001 LP (3))."""
