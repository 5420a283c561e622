"""The platform of paper 003 §2: a digraph with link costs c_{j,k} (time per unit message)
and a port model per node.

Costs come from the capacities a Topology holds: a link of capacity C (units of b, multi-arcs
summed) moves C unit messages per unit time, c = 1/C. Port models (rows of the steady-state
LPs, n_e = messages per unit time on link e):

- ``multi``: every link independent, n_e ≤ C_e;
- ``one`` (003 §2, eq. (4), (5)): one send and one receive at a time,
  Σ_{e out of j} n_e·c_e ≤ 1 and Σ_{e into j} n_e·c_e ≤ 1;
- ``node`` with bandwidth B (units of b): n_e ≤ C_e, Σ_out n_e ≤ B and Σ_in n_e ≤ B. With all
  C_e = 1 it is ``one`` at B = 1 and ``multi`` at B ≥ degree.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology

PORT_MODELS = ("one", "multi", "node")


@dataclass(frozen=True)
class Platform:
    """Merged links (src[e] → dst[e], integer capacity cap[e]), a root, a port model and, for
    ``node``, the node bandwidth B (Fraction, units of b)."""

    n: int
    src: np.ndarray
    dst: np.ndarray
    cap: np.ndarray
    root: int
    port_model: str = "one"
    bandwidth: Fraction | None = None

    @property
    def m(self) -> int:
        return int(self.src.size)

    def cost(self, e: int) -> Fraction:
        """c_e = 1/C_e, time per unit message on link e."""
        return Fraction(1, int(self.cap[e]))

    def port_coefficients(self) -> list[Fraction] | None:
        """Coefficient of n_e in its tail's send row and its head's receive row (c_e for
        ``one``, 1 for ``node``), None for ``multi`` (no port rows)."""
        if self.port_model == "multi":
            return None
        if self.port_model == "one":
            return [self.cost(e) for e in range(self.m)]
        return [Fraction(1)] * self.m

    def port_bound(self) -> Fraction:
        """Right-hand side of every port row: 1 time unit (``one``) or B (``node``)."""
        return Fraction(1) if self.port_model == "one" else Fraction(self.bandwidth)

    def link_bounds(self) -> bool:
        """Whether n_e ≤ C_e rows are needed (implied by the port rows under ``one``)."""
        return self.port_model != "one"

    def reversed(self) -> "Platform":
        """G^T with the same root: a reduce (gather) on G is a broadcast (scatter) on G^T run
        backwards (every send u→w of G^T is a receive-and-combine w←u on G)."""
        _check_reachable(self.n, self.dst, self.src, self.root,
                         "the reversed platform (reduce/gather: every node must reach the root)")
        return Platform(self.n, self.dst.copy(), self.src.copy(), self.cap.copy(), self.root,
                        self.port_model, self.bandwidth)


def check_port_model(port_model: str, bandwidth) -> Fraction | None:
    """The node bandwidth as a Fraction (None unless ``node``); TopofinderError on bad input."""
    if port_model not in PORT_MODELS:
        raise TopofinderError(f"port model {port_model!r} unknown; use one of "
                              f"{', '.join(PORT_MODELS)}")
    if port_model != "node":
        if bandwidth is not None:
            raise TopofinderError("--node-bandwidth needs --port-model node")
        return None
    if bandwidth is None:
        raise TopofinderError("--port-model node needs --node-bandwidth B (units of b) or a "
                              "topology file that states node_bandwidth")
    try:
        b = Fraction(str(bandwidth))
    except (ValueError, ZeroDivisionError):
        raise TopofinderError(f"node bandwidth {bandwidth!r} is not a number") from None
    if b <= 0:
        raise TopofinderError(f"node bandwidth must be positive, got {bandwidth}")
    return b


def make_platform(n: int, src, dst, cap, root: int, port_model: str = "one",
                  bandwidth=None, name: str = "the platform", to_root: bool = False
                  ) -> Platform:
    """A checked Platform from arc lists (parallel arcs summed, self-loops dropped).
    TopofinderError if the root is out of range, a capacity is not a positive integer, or
    some node cannot be reached from the root (``to_root``: cannot reach the root, what reduce
    and gather need)."""
    bw = check_port_model(port_model, bandwidth)
    if not (isinstance(root, (int, np.integer)) and 0 <= int(root) < n):
        raise TopofinderError(f"root {root} out of range: {name} has nodes 0..{n - 1}")
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    cap = np.asarray(cap)
    if cap.size and (np.any(cap <= 0) or np.any(cap != np.round(cap))):
        bad = int(np.flatnonzero((cap <= 0) | (cap != np.round(cap)))[0])
        raise TopofinderError(f"link {src[bad]}->{dst[bad]} of {name} has capacity "
                              f"{cap[bad]}; capacities must be positive integers")
    keep = src != dst
    key = src[keep] * n + dst[keep]
    uniq, inv = np.unique(key, return_inverse=True)
    merged = np.bincount(inv, weights=cap[keep].astype(np.float64)).astype(np.int64)
    s, d = uniq // n, uniq % n
    if to_root:
        _check_reachable(n, d, s, int(root), f"{name} reversed (reduce/gather: every node "
                         "must reach the root)")
    else:
        _check_reachable(n, s, d, int(root), name)
    return Platform(n, s, d, merged, int(root), port_model, bw)


def _check_reachable(n: int, src, dst, root: int, name: str) -> None:
    adj = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(n, n))
    seen = breadth_first_order(adj, root, directed=True, return_predecessors=False)
    if seen.size < n:
        missing = np.setdiff1d(np.arange(n), seen)
        raise TopofinderError(f"{missing.size} node(s) of {name} cannot be reached from root "
                              f"{root} (e.g. node {int(missing[0])}): no one-root collective "
                              "has a positive throughput")


def from_topology(topo: Topology, root: int = 0, port_model: str = "one",
                  bandwidth=None, to_root: bool = False) -> Platform:
    """The Platform of a Topology (costs 1/capacity). Under ``node`` a missing ``bandwidth``
    is the cap the topology file states (Topology.node_cap); a given one overrides it.
    ``to_root``: check that every node reaches the root (reduce, gather) instead of being
    reached from it."""
    if port_model == "node" and bandwidth is None:
        bandwidth = topo.node_cap
    return make_platform(topo.n, topo.src, topo.dst,
                         np.ones(topo.src.size, np.int64) if topo.capacity is None
                         else topo.capacity, root, port_model, bandwidth, topo.expr, to_root)
