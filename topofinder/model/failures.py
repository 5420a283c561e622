"""Failed fibres and nodes: the degraded fabric a failure leaves (docs/model.md "Failures").

A failure is a set of dead fibres and dead nodes of a topology, written in the intact
topology's node numbers:

- ``u->w``  one fibre u → w: one arc u → w leaves (one link of a k-fold multi-arc);
- ``u<->w`` one duplex cable: one arc u → w and one arc w → u leave;
- ``u``     node u and every arc at it leave; the collective runs among the N − 1 survivors,
            renumbered in increasing order, each keeping its name (``Topology.labels``).

The degraded topology's expression is ``Fail(EXPR; ITEMS)`` (items comma-separated), which
:func:`topofinder.families.build.load_topology` rebuilds, so a degraded schedule file names
the fabric it runs on like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology

_ITEM = re.compile(r"\s*(\d+)\s*(?:(->|<->)\s*(\d+)\s*)?$")
_WRAPPED = re.compile(r"\s*Fail\s*\((.*);([^;()]*)\)\s*$", re.S)


@dataclass(frozen=True)
class Failure:
    """Dead elements in intact node numbers: ``fibres`` (u, w) arcs, ``cables`` (u, w) duplex
    cables (both directions), ``nodes``."""

    fibres: tuple[tuple[int, int], ...] = ()
    cables: tuple[tuple[int, int], ...] = ()
    nodes: tuple[int, ...] = ()

    def __str__(self) -> str:
        return ", ".join([f"{u}->{w}" for u, w in self.fibres]
                         + [f"{u}<->{w}" for u, w in self.cables]
                         + [str(v) for v in self.nodes])

    def __add__(self, other: "Failure") -> "Failure":
        return Failure(self.fibres + other.fibres, self.cables + other.cables,
                       self.nodes + other.nodes)


def parse_failure(text: str) -> Failure:
    """``"3->5, 2<->9, 7"`` as a :class:`Failure`; TopofinderError naming a bad item."""
    fibres, cables, nodes = [], [], []
    for item in text.split(","):
        m = _ITEM.match(item)
        if m is None:
            raise TopofinderError(f"bad failure {item.strip()!r}: write a fibre as 'u->w', a "
                                  f"duplex cable as 'u<->w', a node as 'u'")
        u = int(m.group(1))
        if m.group(2) is None:
            nodes.append(u)
        else:
            (fibres if m.group(2) == "->" else cables).append((u, int(m.group(3))))
    return Failure(tuple(fibres), tuple(cables), tuple(nodes))


def split_expression(text: str) -> tuple[str, Failure] | None:
    """(EXPR, failure) of a ``Fail(EXPR; ITEMS)`` expression, else None."""
    m = _WRAPPED.match(text)
    return None if m is None else (m.group(1).strip(), parse_failure(m.group(2)))


def _drop_arc(keep: np.ndarray, topo: Topology, u: int, w: int) -> None:
    """Mark one still-present arc u → w dead; TopofinderError if there is none."""
    for v in (u, w):
        if not 0 <= v < topo.n:
            raise TopofinderError(f"{topo.expr}: node {v} is out of range 0..{topo.n - 1}")
    pair = (topo.src == u) & (topo.dst == w)
    hits = np.flatnonzero(keep & pair)
    if u == w or hits.size == 0:
        more = "a further " if u != w and pair.any() else "a "
        raise TopofinderError(f"{topo.expr}: there is not {more}fibre {u}->{w} to fail")
    keep[hits[0]] = False


def degrade(topo: Topology, failure: Failure, connected: bool = True) -> Topology:
    """The fabric left after ``failure``; with ``connected`` a TopofinderError when it is not
    strongly connected (a collective among the survivors is then impossible)."""
    if topo.has_switches:
        raise TopofinderError(f"{topo.expr}: failure analysis is for direct-connect fabrics "
                              f"(it has switch nodes)")
    keep = np.ones(topo.num_arcs, bool)
    for u, w in failure.fibres:
        _drop_arc(keep, topo, u, w)
    for u, w in failure.cables:
        _drop_arc(keep, topo, u, w)
        _drop_arc(keep, topo, w, u)
    alive = np.ones(topo.n, bool)
    for v in failure.nodes:
        if not 0 <= v < topo.n:
            raise TopofinderError(f"{topo.expr}: node {v} is out of range 0..{topo.n - 1}")
        alive[v] = False
    if alive.sum() < 2:
        raise TopofinderError(f"{topo.expr}: failing {failure} leaves fewer than 2 nodes")
    keep &= alive[topo.src] & alive[topo.dst]
    new = np.cumsum(alive) - 1
    labels = None
    if not alive.all():
        labels = tuple(topo.label(int(v)) for v in np.flatnonzero(alive))
    cap = None if topo.capacity is None else topo.capacity[keep]
    out = Topology(int(alive.sum()), new[topo.src[keep]], new[topo.dst[keep]],
                   expr=f"Fail({topo.expr}; {failure})", capacity=cap, labels=labels)
    if connected and not out.strongly_connected:
        raise TopofinderError(f"{topo.expr}: failing {failure} disconnects the fabric "
                              f"({out.unreachable_text()})")
    return out


def survivors(n: int, failure: Failure) -> np.ndarray:
    """Intact node number of every survivor, in survivor order."""
    alive = np.ones(n, bool)
    alive[list(failure.nodes)] = False
    return np.flatnonzero(alive)
