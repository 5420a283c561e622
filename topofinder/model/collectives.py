"""The collectives topofinder scores, schedules and exports, by the names users type.

A ``StrEnum``: each member *is* its name as a string (``Collective.ALLGATHER == "allgather"``),
so JSON documents, CLI choices and file formats carry the plain name.
"""

from __future__ import annotations

from enum import StrEnum


class Collective(StrEnum):
    """Every collective's one spelling; the module is the only place these strings appear."""

    ALLGATHER = "allgather"
    REDUCE_SCATTER = "reduce-scatter"
    ALLREDUCE = "allreduce"
    ALLTOALL = "alltoall"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    SCATTER = "scatter"
    GATHER = "gather"

    def __repr__(self) -> str:
        """The plain quoted name, so messages read ``'allgather'`` whatever they were given."""
        return repr(self.value)
