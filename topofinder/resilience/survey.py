"""Degraded-mode scores: every single fibre (or duplex cable) and node failure, one per
automorphism orbit (docs/algorithms.md "Failures").

An automorphism p of G maps the fabric left by failing element e onto the one left by failing
p(e), so both have the same T_L, τ, τ_fc and all-to-all flow: scoring one representative per
orbit of the group (bliss, topofinder.scoring.symmetry) and weighting it by the orbit's size
gives the exact distribution over all failures. Scores of a degraded fabric H (paper 001 §3,
002 Thm 1): T_L and τ of the optimal BFB allgather on H, the reduce-scatter's on H^T (001 App.
B, Thm 1), allreduce = both (time by the workload's α-β model), τ_fc = ForestColl's optimum on
H, optionally the all-to-all concurrent-flow bracket. A node failure runs the collective among
the N − 1 survivors with the same total size M; B stays d·b.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from topofinder.errors import TopofinderError
from topofinder.model.failures import Failure, degrade
from topofinder.model.topology import Topology
from topofinder.model.units import exact
from topofinder.scoring.alltoall.concurrent_flow import alltoall_summary
from topofinder.scoring.allgather.bfb import bfb_score
from topofinder.scoring.trees.forestcoll import throughput_optimum
from topofinder.scoring.links import Links
from topofinder.scoring.symmetry import LinkOrbits, orbits, topology_group
from topofinder.workload.cost import Workload

CABLINGS = ("auto", "simplex", "duplex")
#: Most pair candidates (first failure an orbit representative) scored exhaustively for K = 2.
PAIR_BUDGET = 400


@dataclass(frozen=True)
class Score:
    """Scores of one fabric: BFB allgather T_L and τ (M/B), the reduce-scatter's τ on the
    transpose, τ_fc (M/B), allreduce seconds, all-to-all f (None: not asked). ``T_L`` None:
    the fabric is not strongly connected."""

    n: int
    T_L: int | None = None
    tau: Fraction | None = None
    tau_rs: Fraction | None = None
    tau_fc: Fraction | None = None
    allreduce_s: float = float("inf")
    alltoall_f: float | None = None

    def as_dict(self) -> dict:
        if self.T_L is None:
            return {"N": self.n, "disconnects": True}
        doc = {"N": self.n, "T_L": self.T_L, "tau": float(self.tau), "tau_exact": exact(self.tau),
               "tau_rs_exact": exact(self.tau_rs), "allreduce_s": self.allreduce_s}
        if self.tau_fc is not None:
            doc.update(tau_fc=float(self.tau_fc), tau_fc_exact=exact(self.tau_fc))
        if self.alltoall_f is not None:
            doc["alltoall_f"] = self.alltoall_f
        return doc


def score_fabric(topo: Topology, workload: Workload, alltoall: bool = False,
                 forestcoll: bool = True) -> Score:
    """:class:`Score` of one fabric (disconnected: T_L None, infinite allreduce time;
    ``forestcoll`` False: τ_fc left None)."""
    if not topo.strongly_connected:
        return Score(topo.n)
    ag, rs = bfb_score(topo), bfb_score(topo.transpose())
    fc = throughput_optimum(topo, ag.pipelined_load).tau if forestcoll else None
    f = alltoall_summary(topo)["alltoall_f"] if alltoall else None
    t = workload.collective_time(ag.T_L + rs.T_L, float(ag.tau + rs.tau))
    return Score(topo.n, ag.T_L, ag.tau, rs.tau, fc, t, f)


# ---- failure units and their orbits --------------------------------------------------------
def duplex_cabled(topo: Topology, cabling: str) -> bool:
    """Whether a fibre failure takes a duplex cable (both directions): ``cabling`` "duplex",
    or "auto" on a bidirectional fabric (as export --what patch-panel cables it)."""
    if cabling not in CABLINGS:
        raise TopofinderError(f"cabling {cabling!r}; accepted: {', '.join(CABLINGS)}")
    if cabling == "duplex" and not topo.bidirectional:
        raise TopofinderError(f"{topo.expr} is not bidirectional: it cannot be cabled duplex")
    return cabling == "duplex" or (cabling == "auto" and bool(topo.bidirectional))


def unit_failure(u: int, w: int, duplex: bool) -> Failure:
    return Failure(cables=((u, w),)) if duplex else Failure(fibres=((u, w),))


def link_orbits(topo: Topology, duplex: bool, gens):
    """The link failure units under the automorphisms ``gens``: (u, w) pairs (merged links,
    topofinder.scoring.links; u < w for cables), how many fibres (cables) each stands for, and
    their orbit labels. A cable {u, w} is in the orbit of (u, w) or of (w, u): the directed
    link orbits (``LinkOrbits``) joined with their reverses."""
    links = Links.of(topo)
    loops = topo.src == topo.dst
    count = np.bincount(links.index(topo.src[~loops], topo.dst[~loops]), minlength=links.num)
    arc_orbit = LinkOrbits.of(links, gens).arc_orbit
    if not duplex:
        return np.stack([links.tail, links.head], 1), count, arc_orbit
    rev = links.index(links.head, links.tail)
    k = int(arc_orbit.max()) + 1
    join = sp.coo_matrix((np.ones(links.num), (arc_orbit, arc_orbit[rev])), shape=(k, k))
    cable_orbit = connected_components(join, directed=False)[1][arc_orbit]
    one = links.tail < links.head
    return np.stack([links.tail[one], links.head[one]], 1), count[one], cable_orbit[one]


def _representatives(labels: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First member and total weight of every orbit label."""
    _, first = np.unique(labels, return_index=True)
    return first, np.bincount(labels, weight)[labels[first]]


# ---- the survey ---------------------------------------------------------------------------
def _regression(seconds: float, intact: Score) -> float | None:
    """Degraded over intact allreduce time; None when the failure disconnects the fabric."""
    return seconds / intact.allreduce_s if seconds != float("inf") else None


def _summary(intact: Score, rows: list[dict], members) -> dict:
    """Worst, median and best single failure (weighted by orbit size) and the critical
    elements (every member of the worst orbits, by allreduce time)."""
    order = sorted(range(len(rows)), key=lambda i: rows[i]["_t"])
    total = sum(r["orbit_size"] for r in rows)
    seen, median = 0, None
    for i in order:
        seen += rows[i]["orbit_size"]
        if median is None and 2 * seen >= total:
            median = i
    worst_t = rows[order[-1]]["_t"]
    critical = [m for i in order if rows[i]["_t"] == worst_t for m in members(i)]

    def pick(i):
        r = dict(rows[i])
        r["regression"] = _regression(r.pop("_t"), intact)
        return r
    return {"failures": int(total), "orbits": len(rows),
            "disconnecting": int(sum(r["orbit_size"] for r in rows if r["_t"] == float("inf"))),
            "worst": pick(order[-1]), "median": pick(median), "best": pick(order[0]),
            "critical": critical, "table": [pick(i) for i in order]}


def _row(topo, failure: Failure, size: int, workload, alltoall) -> dict:
    s = score_fabric(degrade(topo, failure, connected=False), workload, alltoall)
    return {"failure": str(failure), "orbit_size": int(size), **s.as_dict(),
            "_t": s.allreduce_s}


@dataclass(frozen=True)
class Units:
    """The single failures of one kind: ``failures[i]``, its weight (how many fibres, cables
    or nodes it stands for), its orbit label, and the member names of each orbit."""

    kind: str
    failures: list
    weight: np.ndarray
    labels: np.ndarray

    @classmethod
    def links(cls, topo: Topology, duplex: bool, gens) -> "Units":
        pairs, count, labels = link_orbits(topo, duplex, gens)
        return cls("cable" if duplex else "fibre",
                   [unit_failure(int(u), int(w), duplex) for u, w in pairs], count, labels)

    @classmethod
    def nodes(cls, topo: Topology, gens) -> "Units":
        return cls("node", [Failure(nodes=(v,)) for v in range(topo.n)],
                   np.ones(topo.n, np.int64), orbits(topo.n, list(gens)))


def single(topo, units: Units, intact: Score, workload, alltoall=False, progress=None) -> dict:
    """Every single failure of ``units``, one per orbit, summarised (:func:`_summary`)."""
    reps, size = _representatives(units.labels, units.weight)
    rows = []
    for k, (i, s) in enumerate(zip(reps, size)):
        rows.append(_row(topo, units.failures[i], s, workload, alltoall))
        if progress:
            progress(units.kind, k + 1, reps.size)

    def members(j):
        return [str(units.failures[i]) for i in np.flatnonzero(units.labels
                                                                == units.labels[reps[j]])]
    return {"unit": units.kind, **_summary(intact, rows, members)}


def _pair_candidates(units: Units) -> list[tuple[int, int]]:
    """Pairs (r, j): r an orbit representative, j any other unit (or r again when it stands
    for two or more fibres). Every pair of failures is mapped by an automorphism onto one
    whose first failure is a representative, so these cover every orbit of pairs."""
    reps, _ = _representatives(units.labels, units.weight)
    is_rep = np.zeros(len(units.failures), bool)
    is_rep[reps] = True
    out = []
    for r in reps:
        for j in range(len(units.failures)):
            if (j == r and units.weight[r] < 2) or (is_rep[j] and j < r):
                continue
            out.append((int(r), j))
    return out


def pairs(topo, units: Units, intact: Score, workload, budget: int = PAIR_BUDGET,
          alltoall=False, progress=None, seed: int = 0) -> dict:
    """The worst pair of failures of ``units``: exhaustive over :func:`_pair_candidates`
    when there are at most ``budget``, else ``budget`` of them drawn uniformly (seeded), a
    lower estimate of the worst."""
    cand = _pair_candidates(units)
    method = f"exhaustive by orbits ({len(cand)} pairs with a representative first)"
    if len(cand) > budget:
        method = (f"sampled: {budget} of {len(cand)} pairs with a representative first, "
                  f"uniformly (seed {seed}); the worst found")
        pick = np.random.default_rng(seed).choice(len(cand), budget, replace=False)
        cand = [cand[i] for i in np.sort(pick)]
    rows = []
    for k, (a, b) in enumerate(cand):
        rows.append(_row(topo, units.failures[a] + units.failures[b], 1, workload, alltoall))
        if progress:
            progress(units.kind + " pairs", k + 1, len(cand))
    worst_t = max(r["_t"] for r in rows)
    worst = [r for r in rows if r["_t"] == worst_t]
    for r in worst:
        r["regression"] = _regression(r.pop("_t"), intact)
        r.pop("orbit_size")
    return {"unit": units.kind + " pair", "method": method, "evaluated": len(rows),
            "disconnecting": sum(r.get("disconnects", False) for r in rows),
            "worst": worst[0], "critical": [r["failure"] for r in worst]}


def survey(topo: Topology, workload: Workload | None = None, links: int = 1, nodes: int = 1,
           cabling: str = "auto", alltoall: bool = False, pair_budget: int = PAIR_BUDGET,
           progress=None) -> dict:
    """The `topofinder fail` document: the intact scores, then for K = 1 (and 2) fibre or
    cable failures and node failures the worst / median / best regression (allreduce time
    over the intact fabric's) and the critical elements."""
    for k, what in ((links, "--links"), (nodes, "--nodes")):
        if k not in (0, 1, 2):
            raise TopofinderError(f"fail: {what} takes 0, 1 or 2 simultaneous failures, got {k}")
    workload = workload or Workload()
    if not topo.strongly_connected:
        raise TopofinderError(f"{topo.expr} is not strongly connected "
                              f"({topo.unreachable_text()}): nothing to degrade")
    duplex = duplex_cabled(topo, cabling)
    group = topology_group(topo)
    intact = score_fabric(topo, workload, alltoall)
    doc = {"expr": topo.expr, "N": topo.n, "d": topo.degree, "cabling": "duplex" if duplex
           else "simplex", "automorphisms": group.order, "workload": workload.describe(),
           "intact": intact.as_dict()}
    for key, k, units in (("links", links, lambda: Units.links(topo, duplex, group.generators)),
                          ("nodes", nodes, lambda: Units.nodes(topo, group.generators))):
        if k == 0:
            continue
        u = units()
        doc[f"single_{key}"] = single(topo, u, intact, workload, alltoall, progress)
        if k == 2:
            doc[f"pair_{key}"] = pairs(topo, u, intact, workload, pair_budget, alltoall,
                                       progress)
    return doc
