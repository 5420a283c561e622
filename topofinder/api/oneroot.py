"""One-root collectives in steady state (paper 003): exact throughput with certificates and
periodic schedules (docs/algorithms.md "One-root collectives")."""

from __future__ import annotations

import os

from topofinder.api.topology import Source, emit, load
from topofinder.model.oneroot_schedule import PeriodicSchedule
from topofinder.scoring.oneroot.summary import oneroot_schedule, oneroot_score
from topofinder.model.collectives import Collective


def score_oneroot(source: Source, collective: str = Collective.BROADCAST, *, root: int = 0,
                  port_model: str = "one", node_bandwidth=None, compare: bool = True,
                  progress=None) -> dict:
    """The steady-state throughput of a one-root ``collective`` (broadcast, reduce, scatter,
    gather) from ``root`` under ``port_model`` ("one", "multi", or "node" with
    ``node_bandwidth`` B in units of b), as `topofinder score --collective` prints it: TP
    exact ("p/q", unit messages per unit time) with its certificate, and for broadcast and
    reduce the best single tree (heuristic) and best DAG next to it, with their ratios to
    TP. ``progress(round, bound, violated cuts)`` follows the cut generation of large
    one-port / node-capacity broadcasts.

    >>> score_oneroot("C(8,{1,3})", "broadcast")["TP_exact"]
    '1/1'
    """
    topo = load(source, collective=collective, root=root)
    return oneroot_score(topo, collective, root, port_model, node_bandwidth, compare,
                         progress)


def schedule_oneroot(source: Source, collective: str = Collective.BROADCAST, *, root: int = 0,
                     port_model: str = "one", node_bandwidth=None,
                     path: str | os.PathLike | None = None) -> PeriodicSchedule:
    """The periodic broadcast (or reduce) schedule at the optimal TP, replayed (weighted trees
    and, under one-port, matchings; docs/formats.md); its JSON also written to ``path``."""
    topo = load(source, collective=collective, root=root)
    sched = oneroot_schedule(topo, collective, root, port_model, node_bandwidth)
    if path is not None:
        emit(sched.to_json() + "\n", path)
    return sched
