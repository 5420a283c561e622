"""Rank files: which host runs which rank (node) of a topology, for MPI and torchrun.

Rank r is node r of the topology (the numbering every schedule export uses); its host is the
node's label (the name the topology file gave it, :attr:`Topology.labels`), or ``node<r>``
when the topology has no names. Formats (``export --what ranks --format F``):

- ``csv``: ``rank,label``, one row per rank.
- ``hostfile``: Open MPI / MPICH hostfile, ``HOST slots=1`` in rank order (with one slot per
  host, ``mpirun --hostfile`` places rank r on line r).
- ``rankfile``: Open MPI rankfile, ``rank R=HOST slot=0`` (pins every rank explicitly).
- ``torchrun``: one line per host, ``HOST torchrun --nnodes=N --nproc-per-node=1
  --node-rank=R --master-addr=HOST0 --master-port=29500`` (run it on HOST, followed by the
  training script); torch.distributed's global rank is then R.
"""

from __future__ import annotations

import re

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology

RANK_FORMATS = ("csv", "hostfile", "rankfile", "torchrun")
MASTER_PORT = 29500


def hosts(topo: Topology) -> list[str]:
    """Host name of every rank 0..N−1."""
    names = [f"node{r}" for r in range(topo.n)] if topo.labels is None else list(topo.labels)
    bad = next((x for x in names if not re.fullmatch(r"[^\s#,=]+", x)), None)
    if bad is not None:
        raise TopofinderError(f"host name {bad!r} has a space, '#', ',' or '='; rank files "
                              "need plain host names")
    return names


def ranks_text(topo: Topology, fmt: str = "csv") -> str:
    """The rank file of ``topo`` in ``fmt`` (one of :data:`RANK_FORMATS`; module doc)."""
    names = hosts(topo)
    if fmt == "csv":
        return "rank,label\n" + "".join(f"{r},{h}\n" for r, h in enumerate(names))
    if fmt == "hostfile":
        return "".join(f"{h} slots=1\n" for h in names)
    if fmt == "rankfile":
        return "".join(f"rank {r}={h} slot=0\n" for r, h in enumerate(names))
    if fmt == "torchrun":
        return "".join(f"{h} torchrun --nnodes={topo.n} --nproc-per-node=1 --node-rank={r} "
                       f"--master-addr={names[0]} --master-port={MASTER_PORT}\n"
                       for r, h in enumerate(names))
    raise TopofinderError(f"rank file format {fmt!r}; accepted: {', '.join(RANK_FORMATS)}")
