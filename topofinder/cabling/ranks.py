"""Rank files: which host runs which rank (node) of a topology, for MPI and torchrun.

Rank r is node r of the topology (the numbering every schedule export uses); its host is the
node's label (the name the topology file gave it, :attr:`Topology.labels`), or ``node<r>``
when the topology has no names. Host files, rank files and torchrun lines take only plain
host names (``model/names.py: HOST_NAME``; others are refused in one line). Formats
(``export --what ranks --format F``):

- ``csv``: ``rank,label``, one row per rank (any printable name; formula-like cells get a
  leading ``'``, docs/formats.md "Names").
- ``hostfile``: Open MPI / MPICH hostfile, ``HOST slots=1`` in rank order (with one slot per
  host, ``mpirun --hostfile`` places rank r on line r).
- ``rankfile``: Open MPI rankfile, ``rank R=HOST slot=0`` (pins every rank explicitly).
- ``torchrun``: one line per host, ``HOST torchrun --nnodes=N --nproc-per-node=1
  --node-rank=R --master-addr=HOST0 --master-port=29500`` (run it on HOST, followed by the
  training script); torch.distributed's global rank is then R.
"""

from __future__ import annotations

import io
import shlex

from topofinder.errors import TopofinderError
from topofinder.model.names import CsvWriter, host_name
from topofinder.model.topology import Topology

RANK_FORMATS = ("csv", "hostfile", "rankfile", "torchrun")
MASTER_PORT = 29500


def hosts(topo: Topology) -> list[str]:
    """Name of every rank 0..N−1: its label, or ``node<r>`` when the topology has none."""
    return [f"node{r}" for r in range(topo.n)] if topo.labels is None else list(topo.labels)


def ranks_text(topo: Topology, fmt: str = "csv") -> str:
    """The rank file of ``topo`` in ``fmt`` (one of :data:`RANK_FORMATS`; module doc). Host
    files, rank files and shell lines take plain host names only (model/names.py); CSV takes
    any name, with formula-like cells neutralised."""
    if fmt not in RANK_FORMATS:
        raise TopofinderError(f"rank file format {fmt!r}; accepted: {', '.join(RANK_FORMATS)}")
    if fmt == "csv":
        buf = io.StringIO()
        CsvWriter(buf).writerows([("rank", "label"), *enumerate(hosts(topo))])
        return buf.getvalue()
    names = [host_name(h) for h in hosts(topo)]
    if fmt == "hostfile":
        return "".join(f"{h} slots=1\n" for h in names)
    if fmt == "rankfile":
        return "".join(f"rank {r}={h} slot=0\n" for r, h in enumerate(names))
    return "".join(shlex.join([h, "torchrun", f"--nnodes={topo.n}", "--nproc-per-node=1",
                               f"--node-rank={r}", f"--master-addr={names[0]}",
                               f"--master-port={MASTER_PORT}"]) + "\n"
                   for r, h in enumerate(names))
