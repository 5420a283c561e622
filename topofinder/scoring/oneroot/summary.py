"""The one-root score of a topology (what `topofinder score --collective ...` prints) and its
periodic schedule."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from topofinder.errors import TopofinderError
from topofinder.model.oneroot_schedule import PeriodicSchedule, replay
from topofinder.model.topology import Topology
from topofinder.model.units import exact
from topofinder.scoring.oneroot.periodic import periodic_schedule
from topofinder.scoring.oneroot.platform import from_topology
from topofinder.scoring.oneroot.steady import Throughput, throughput
from topofinder.scoring.oneroot.structures import best_dag, weighted_trees
from topofinder.scoring.oneroot.tree_heuristic import best_tree
from topofinder.model.collectives import Collective
from topofinder.model.needs import TO_ROOT

#: Beyond this many nodes the best-DAG comparison is skipped (one LP per tried order).
DAG_MAX_NODES = 2048
#: Weighted trees (Bérczi–Frank packing, a max-flow per tree arc) up to this many nodes
#: (a heterogeneous N = 1024 platform: 35 trees in 20 s, replayed in minutes; issue 40).
PACK_MAX_NODES = 1024


def _text(value):
    """Fractions as "p/q" all through a certificate (JSON-ready)."""
    if isinstance(value, Fraction):
        return exact(value)
    if isinstance(value, dict):
        return {str(k): _text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    return value


def _compare(res: Throughput) -> dict:
    """Best single tree (heuristic) and best DAG next to the optimum (003 §3.1), each with
    its ratio to the optimum TP."""
    pl = res.platform
    tree, parent = best_tree(pl)
    out = {"best_tree": float(tree), "best_tree_exact": exact(tree),
           "best_tree_ratio": float(tree / res.value),
           "best_tree_method": "exact (widest arborescence)" if pl.port_model == "multi"
           else "heuristic (greedy + Hamiltonian path + re-parenting)"}
    if pl.n <= DAG_MAX_NODES:
        dag, _, exhaustive = best_dag(pl, parent)
        out |= {"best_dag": float(dag), "best_dag_exact": exact(dag),
                "best_dag_ratio": float(dag / res.value),
                "best_dag_method": "exact (every vertex order)" if exhaustive
                else "heuristic (BFS and tree orders)"}
    return out


def oneroot_score(topo: Topology, collective: str = Collective.BROADCAST, root: int = 0,
                  port_model: str = "one", bandwidth=None, compare: bool = True,
                  progress=None) -> dict:
    """TP exact with its certificate, plus the best tree and DAG for broadcast/reduce.
    TP is in unit messages per unit time (a unit message takes 1/C on a capacity-C link):
    a stream of H-byte messages runs at TP·b/H messages per second. ``progress``: see
    steady.throughput."""
    pl = from_topology(topo, root, port_model, bandwidth, collective in TO_ROOT)
    res = throughput(pl, collective, progress)
    out = {"expr": topo.expr, "n": topo.n, "collective": collective, "root": root,
           "port_model": port_model,
           "node_bandwidth": None if pl.bandwidth is None else exact(pl.bandwidth),
           "TP": float(res.value), "TP_exact": exact(res.value),
           "certificate": _text(res.certificate)}
    if compare and collective in (Collective.BROADCAST, Collective.REDUCE):
        out |= _compare(res)
    return out


def oneroot_schedule(topo: Topology, collective: str = Collective.BROADCAST, root: int = 0,
                     port_model: str = "one", bandwidth=None) -> PeriodicSchedule:
    """The replayed periodic schedule at the optimal TP (003 §5.3–5.4); for reduce, the
    broadcast schedule of G^T (run it backwards, combining instead of copying)."""
    if collective not in (Collective.BROADCAST, Collective.REDUCE):
        raise TopofinderError(f"periodic schedules are built for broadcast and reduce, not "
                              f"{collective!r}")
    res = throughput(from_topology(topo, root, port_model, bandwidth, collective in TO_ROOT),
                     collective)
    pl = res.platform
    if res.certificate.get("primal") == "tree":
        trees = [(res.value, _tree_of(res))]
    elif pl.n <= PACK_MAX_NODES:
        trees = weighted_trees(pl, res.rates, res.value)
    else:
        raise TopofinderError(f"weighted tree packing is limited to {PACK_MAX_NODES} nodes "
                              f"here ({topo.expr} has {pl.n}) unless one tree is optimal")
    sched = periodic_schedule(pl, trees)
    sched = replace(sched, collective=collective, topology=topo.expr)
    replay(sched)
    return sched


def _tree_of(res: Throughput) -> list[int]:
    pl = res.platform
    parent = [-1] * pl.n
    for e, r in enumerate(res.rates):
        if r:
            parent[int(pl.dst[e])] = e
    return parent


def asymptotic_rows(name: str, sched: PeriodicSchedule, ks=(10, 100, 1000)) -> list[dict]:
    """003 Thm 7 numerically: the replayed time T(K) for the first K messages against K/TP
    (ratio T(K)·TP/K → 1)."""
    tp = sched.throughput
    rows = []
    for k in ks:
        t = replay(sched, k).completion
        rows.append({"platform": name, "port_model": sched.port_model, "TP": exact(tp),
                     "period": exact(sched.period), "K": k, "T_K": exact(t),
                     "K_over_TP": exact(k / tp), "ratio": float(t * tp / k)})
    return rows
