"""Failed fibres and nodes: the degraded fabric a failure leaves (docs/model.md "Failures").

A failure is a set of dead fibres and dead nodes of a topology, written in the intact
topology's node numbers:

- ``u->w``  one fibre u → w: one arc u → w leaves (one link of a k-fold multi-arc);
- ``u<->w`` one duplex cable: one arc u → w and one arc w → u leave;
- ``u``     node u and every arc at it leave; the collective runs among the N − 1 survivors,
            renumbered in increasing order, each keeping its name (``Topology.labels``);
- ``+u->w`` a fibre u → w is patched in (bypass re-patching around a dead node).

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

_ITEM = re.compile(r"\s*(\+)?\s*(\d+)\s*(?:(->|<->)\s*(\d+)\s*)?$")
_WRAPPED = re.compile(r"\s*Fail\s*\((.*);([^;()]*)\)\s*$", re.S)


@dataclass(frozen=True)
class Failure:
    """Dead elements in intact node numbers: ``fibres`` (u, w) arcs, ``cables`` (u, w) duplex
    cables (both directions), ``nodes``; ``added`` (u, w) fibres patched in."""

    fibres: tuple[tuple[int, int], ...] = ()
    cables: tuple[tuple[int, int], ...] = ()
    nodes: tuple[int, ...] = ()
    added: tuple[tuple[int, int], ...] = ()

    def __str__(self) -> str:
        return ", ".join([f"{u}->{w}" for u, w in self.fibres]
                         + [f"{u}<->{w}" for u, w in self.cables]
                         + [str(v) for v in self.nodes]
                         + [f"+{u}->{w}" for u, w in self.added])

    def __add__(self, other: "Failure") -> "Failure":
        return Failure(self.fibres + other.fibres, self.cables + other.cables,
                       self.nodes + other.nodes, self.added + other.added)


def parse_failure(text: str) -> Failure:
    """``"3->5, 2<->9, 7"`` as a :class:`Failure`; TopofinderError naming a bad item."""
    fibres, cables, nodes, added = [], [], [], []
    for item in text.split(","):
        m = _ITEM.match(item)
        if m is None or (m.group(1) and m.group(3) != "->"):
            raise TopofinderError(f"bad failure {item.strip()!r}: write a fibre as 'u->w', a "
                                  f"duplex cable as 'u<->w', a node as 'u', a fibre patched "
                                  f"in as '+u->w'")
        u = int(m.group(2))
        if m.group(3) is None:
            nodes.append(u)
        else:
            pair = (u, int(m.group(4)))
            (added if m.group(1) else fibres if m.group(3) == "->" else cables).append(pair)
    return Failure(tuple(fibres), tuple(cables), tuple(nodes), tuple(added))


def split_expression(text: str) -> tuple[str, Failure] | None:
    """(EXPR, failure) of a ``Fail(EXPR; ITEMS)`` expression, else None."""
    m = _WRAPPED.match(text)
    return None if m is None else (m.group(1).strip(), parse_failure(m.group(2)))


def _in_range(topo: Topology, v: int) -> None:
    if not 0 <= v < topo.n:
        raise TopofinderError(f"{topo.expr}: node {v} is out of range 0..{topo.n - 1}")


def _drop_arc(keep: np.ndarray, topo: Topology, u: int, w: int) -> None:
    """Mark one still-present arc u → w dead; TopofinderError if there is none."""
    _in_range(topo, u)
    _in_range(topo, w)
    pair = (topo.src == u) & (topo.dst == w)
    hits = np.flatnonzero(keep & pair)
    if u == w or hits.size == 0:
        more = "a further " if u != w and pair.any() else "a "
        raise TopofinderError(f"{topo.expr}: there is not {more}fibre {u}->{w} to fail")
    keep[hits[0]] = False


def survivors(n: int, failure: Failure) -> np.ndarray:
    """Intact node number of every survivor, in survivor order."""
    alive = np.ones(n, bool)
    alive[list(failure.nodes)] = False
    return np.flatnonzero(alive)


def degrade(topo: Topology, failure: Failure, connected: bool = True) -> Topology:
    """The fabric left after ``failure`` (fibres patched in last); with ``connected`` a
    TopofinderError when it is not strongly connected (no collective among the survivors)."""
    if topo.has_switches:
        raise TopofinderError(f"{topo.expr}: failure analysis is for direct-connect fabrics "
                              f"(it has switch nodes)")
    keep = np.ones(topo.num_arcs, bool)
    for u, w in failure.fibres:
        _drop_arc(keep, topo, u, w)
    for u, w in failure.cables:
        _drop_arc(keep, topo, u, w)
        _drop_arc(keep, topo, w, u)
    for v in failure.nodes + tuple(x for arc in failure.added for x in arc):
        _in_range(topo, v)
    alive = survivors(topo.n, failure)
    if alive.size < 2:
        raise TopofinderError(f"{topo.expr}: failing {failure} leaves fewer than 2 nodes")
    new = np.full(topo.n, -1)
    new[alive] = np.arange(alive.size)
    keep &= (new[topo.src] >= 0) & (new[topo.dst] >= 0)
    add = np.array(failure.added, np.int64).reshape(-1, 2)
    if (new[add] < 0).any():
        raise TopofinderError(f"{topo.expr}: a fibre patched in ends at a dead node")
    labels = None if alive.size == topo.n else tuple(topo.label(int(v)) for v in alive)
    cap = None if topo.capacity is None else np.concatenate([topo.capacity[keep],
                                                             np.ones(len(add), np.int64)])
    out = Topology(int(alive.size), new[np.concatenate([topo.src[keep], add[:, 0]])],
                   new[np.concatenate([topo.dst[keep], add[:, 1]])],
                   expr=f"Fail({topo.expr}; {failure})", capacity=cap, labels=labels)
    if connected and not out.strongly_connected:
        raise TopofinderError(f"{topo.expr}: failing {failure} disconnects the fabric "
                              f"({out.unreachable_text()})")
    return out
