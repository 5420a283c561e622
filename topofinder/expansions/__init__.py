"""Expansions (paper 001 §5): what line graph, degree expansion, Cartesian power and Bi(G) do to
an allgather schedule, their exact predicted (N, d, T_L, τ), and the analytical schedules of the
small generative bases."""
