"""Running exported schedules on real buffers (the CPU path of paper 001 §7).

:mod:`topofinder.execute.plan` turns a step or tree schedule into per-rank message plans
(no MPI needed); :mod:`topofinder.execute.mpi` runs them with mpi4py and checks the result
against MPI's own collective. mpi4py and an MPI come with the ``mpi`` extra.
"""

from __future__ import annotations

import os

# Rank variables set by the common launchers: MPICH/Hydra (PMI_RANK), Open MPI, PMIx, Slurm.
_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


def launcher_rank() -> int | None:
    """This process's rank as the MPI launcher announced it in the environment, or None when
    not started by a launcher (lets non-zero ranks keep quiet before MPI is initialised)."""
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def is_quiet_rank() -> bool:
    """True on ranks other than 0 of an MPI launch: they print no errors (rank 0 does)."""
    rank = launcher_rank()
    return rank is not None and rank != 0
