"""Scoring a topology, in three parts beside a shared symmetry core (symmetry.py): allgather
step schedules (allgather/: BFB, paper 001 §6, LP (1); k-step), tree collectives (trees/:
ForestColl's optimum and tree packing, paper 002) and all-to-all (alltoall/: the maximum
concurrent flow, paper 001 LP (3))."""
