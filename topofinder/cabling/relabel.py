"""A topology or schedule in the numbering of the cables after a patch-panel diff.

``export NEW --what patch-panel --diff OLD.csv --mapping MAP.csv`` writes the relabelling φ
(CSV ``node,node_label,physical_node,physical_label``: node x of NEW is cabled as node φ(x) of
the old plan, whose host is ``physical_label``). Renaming every node x to φ(x) is a graph
isomorphism, so a schedule of NEW renamed the same way (paper 001 Def. 7, schedule
isomorphism) has the same T_L and τ and sends only on fibres that exist after the diff.
Documents written this way keep ``topology`` = NEW's expression and add ``physical`` (φ as a
list), so :func:`topofinder.api.load_schedule` rebuilds the renamed topology.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.inputs import read_input
from topofinder.cabling.patch_panel import MAPPING_HEADER
from topofinder.model.alltoall_schedule import AllToAllSchedule
from topofinder.model.names import check_name, csv_rows
from topofinder.model.schedule import StepSchedule, relabel
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import Tree, TreeSchedule

@dataclass(frozen=True)
class Mapping:
    """φ: ``physical[x]`` = the node (rank after the diff) that plays node x; ``labels``:
    the host name of every rank after the diff (None: plain numbers)."""

    physical: np.ndarray
    labels: tuple[str, ...] | None


def parse_mapping(text: str, source: str = "mapping") -> Mapping:
    """Parse mapping CSV text (header :data:`MAPPING_HEADER`)."""
    reader = csv_rows(text, source)
    header = [h.strip() for h in next(reader, [])]
    if header != MAPPING_HEADER:
        raise TopofinderError(f"{source}: the header must be {','.join(MAPPING_HEADER)} (the "
                              "file 'export --what patch-panel --diff ... --mapping' writes)")
    phys, names = {}, {}
    for line, rec in enumerate(reader, start=2):
        if not rec:
            continue
        try:
            x, u = int(rec[0]), int(rec[2])
            name = check_name(rec[3].strip(), f"{source} line {line}")
        except (ValueError, IndexError):
            raise TopofinderError(f"{source} line {line}: expected node,node_label,"
                                  "physical_node,physical_label with integer nodes") from None
        if x in phys:
            raise TopofinderError(f"{source} line {line}: node {x} is mapped twice")
        phys[x], names[u] = u, name
    n = len(phys)
    if sorted(phys) != list(range(n)) or sorted(phys.values()) != list(range(n)):
        raise TopofinderError(f"{source}: the mapping must be a permutation of 0..{n - 1} (the "
                              "old plan and the new topology must have the same node count)")
    labels = tuple(names[u] for u in range(n))
    if labels == tuple(str(i) for i in range(n)):
        labels = None
    return Mapping(np.array([phys[x] for x in range(n)], np.int64), labels)


def document_mapping(physical, labels, where: str) -> Mapping:
    """The mapping a schedule document records (``physical`` and ``labels`` of a schedule
    exported with --relabel), checked: ``physical`` a permutation of 0..N−1, ``labels`` absent
    or N usable names (:func:`~topofinder.model.names.check_name`)."""
    n = len(physical) if isinstance(physical, (list, tuple)) else -1
    if n < 1 or any(isinstance(x, bool) or not isinstance(x, int) for x in physical) \
            or sorted(physical) != list(range(n)):
        raise TopofinderError(f"{where}: 'physical' must be a permutation of the nodes "
                              f"0..N-1 (as export --relabel writes it)")
    if labels is not None:
        if not isinstance(labels, (list, tuple)) or len(labels) != n \
                or not all(isinstance(x, str) for x in labels):
            raise TopofinderError(f"{where}: 'labels' must be a list of {n} node names")
        labels = tuple(check_name(x, f"{where}: labels") for x in labels)
    return Mapping(np.asarray(physical, np.int64), labels or None)


def read_mapping(path) -> Mapping:
    return parse_mapping(read_input(path, "mapping"), str(path))


def relabel_topology(topo: Topology, mapping: Mapping) -> Topology:
    """``topo`` with node x renamed φ(x) (same expression; the hosts' labels)."""
    phys = mapping.physical
    if phys.size != topo.n:
        raise TopofinderError(f"the mapping is for {phys.size} nodes, {topo.expr} has "
                              f"{topo.n}")
    return Topology(topo.n, phys[topo.src], phys[topo.dst], expr=topo.expr,
                    capacity=topo.capacity, bidirectional=topo.bidirectional,
                    labels=mapping.labels)


def relabel_schedule(schedule: StepSchedule | TreeSchedule | AllToAllSchedule,
                     mapping: Mapping) -> StepSchedule | TreeSchedule | AllToAllSchedule:
    """The schedule with every node x renamed φ(x), on :func:`relabel_topology`."""
    topo = relabel_topology(schedule.topology, mapping)
    phys = mapping.physical
    if isinstance(schedule, StepSchedule):
        return relabel(schedule, phys, topo)
    if isinstance(schedule, AllToAllSchedule):            # rows t, u, w, src, dst
        s = schedule.sends
        return AllToAllSchedule(topo, np.column_stack([s[:, 0], phys[s[:, 1:]]]),
                                schedule.amounts, method=schedule.method,
                                bound=schedule.bound)
    trees = [Tree(int(phys[t.root]), t.weight, [(int(phys[u]), int(phys[w]))
                                                 for u, w in t.edges])
             for t in schedule.trees]
    return TreeSchedule(topo, trees, method=schedule.method)
