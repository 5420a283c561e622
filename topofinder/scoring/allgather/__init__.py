"""Allgather step schedules and their exact (T_L, τ): BFB (paper 001 §6, LP (1)) and its
streamed scorer, k-step schedules between BFB and the throughput optimum (issue 18), and the
ring and two-tree schedules of the baseline topologies (paper 001 §8.2)."""
