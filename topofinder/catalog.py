"""The base catalog (catalog/*.json): small base topologies with their allgather schedules and
provenance (paper 001 Table 9; DESIGN §4, §9).

One JSON file per entry, named after the expression with every run of non-alphanumerics
replaced by "_" (``DBJMod(2,4)`` → ``catalog/DBJMod_2_4.json``)::

    {"expr", "N", "d", "arcs": [[u, w], ...], "bidirectional", "reverse_symmetric",
     "reverse_isomorphism": [p(0), ...] (optional: (u, w) an arc iff (p(w), p(u)) one),
     "schedule": {step-schedule JSON of DESIGN §10}, "T_L" (steps), "tau" ("p/q", M/B),
     "bw_optimal", "moore_optimal", "provenance": {"command", "method", "source", "seconds"}}

The distance-regular graphs are listed in catalog/distance_regular.json (their own format,
built by :mod:`topofinder.generators.distance_regular`); :func:`entries` lists them too.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from topofinder.errors import TopofinderError
from topofinder.summary import moore_bound_steps
from topofinder.topology import Topology

if TYPE_CHECKING:                       # schedule machinery is loaded only where it is used
    from topofinder.schedule import StepSchedule

CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalog"
DISTANCE_REGULAR_FILE = "distance_regular.json"
STATIC_COMMAND = "python3 -c 'from topofinder.catalog import build_static_entries; " \
                 "build_static_entries()'"


def entry_path(expr: str, directory: Path | None = None) -> Path:
    """catalog/<expr with non-alphanumeric runs replaced by '_'>.json."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", expr).strip("_")
    if not stem:
        raise TopofinderError(f"catalog: expression {expr!r} gives an empty file name")
    return (directory or CATALOG_DIR) / f"{stem}.json"


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TopofinderError(f"catalog: cannot read {path}: {exc}") from None


def _schedule_entries(directory: Path) -> list[dict]:
    if not directory.is_dir():
        return []
    return [_read(p) for p in sorted(directory.glob("*.json"))
            if p.name != DISTANCE_REGULAR_FILE]


def _distance_regular_entries(directory: Path) -> list[dict]:
    """The distance-regular list, one summary dict per graph (no stored schedule: BFB)."""
    path = directory / DISTANCE_REGULAR_FILE
    if not path.exists():
        return []
    data = _read(path)
    items = data.get("graphs", data.get("entries", [])) if isinstance(data, dict) else data
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        row = dict(item)
        if "expr" not in row and "name" in row:
            row["expr"] = f"DistReg({row['name']})"
        row.setdefault("provenance", {"source": "paper 001 App. F.3, Table 8",
                                      "method": "distance-regular (BFB)"})
        row["kind"] = "distance-regular"
        out.append(row)
    return out


def entries(directory: Path | None = None) -> list[dict]:
    """Every catalog entry as stored (schedule entries, then distance-regular graphs), sorted
    by (d, N, expr)."""
    directory = directory or CATALOG_DIR
    rows = _schedule_entries(directory) + _distance_regular_entries(directory)
    return sorted(rows, key=lambda e: (e.get("d", 0), e.get("N", 0), str(e.get("expr"))))


def load_entry(expr: str, directory: Path | None = None) -> dict:
    """The stored entry whose expression is ``expr`` (TopofinderError naming the known ones)."""
    directory = directory or CATALOG_DIR
    path = entry_path(expr, directory)
    if path.exists():
        entry = _read(path)
        if entry.get("expr") == expr:
            return entry
    for entry in _schedule_entries(directory):
        if entry.get("expr") == expr:
            return entry
    known = ", ".join(e["expr"] for e in _schedule_entries(directory)) or "none"
    raise TopofinderError(f"catalog: no entry {expr!r}; entries with schedules: {known}")


def _topology(entry: dict) -> Topology:
    arcs = np.asarray(entry["arcs"], dtype=np.int64).reshape(-1, 2)
    rev = entry.get("reverse_isomorphism")
    return Topology(int(entry["N"]), arcs[:, 0], arcs[:, 1], expr=entry["expr"],
                    bidirectional=entry.get("bidirectional"),
                    reverse_isomorphism=None if rev is None else np.asarray(rev, np.int64))


def catalog_topology(expr: str, directory: Path | None = None) -> Topology:
    """The Topology of catalog entry ``expr`` (e.g. "Diamond", "DBJMod(2,4)"); its arc
    numbering is the one its schedule uses."""
    return _topology(load_entry(expr, directory))


def catalog_schedule(expr: str, directory: Path | None = None) -> StepSchedule:
    """The stored allgather StepSchedule of catalog entry ``expr`` (method "catalog")."""
    from topofinder.schedule import StepSchedule

    entry = load_entry(expr, directory)
    topo = _topology(entry)
    data = entry.get("schedule")
    if data is None:
        raise TopofinderError(f"catalog: entry {expr!r} stores no schedule")
    sched = StepSchedule.from_json(data, topo)
    return StepSchedule(topology=topo, shard_chunks=sched.shard_chunks, sends=sched.sends,
                        collective=sched.collective, method="catalog")


def find_reverse_isomorphism(topo: Topology, max_nodes: int = 64) -> np.ndarray | None:
    """A permutation p with (u, w) an arc iff (p(w), p(u)) one, i.e. G ≅ G^T (Appendix B,
    Def 6), by VF2 on the multiplicity-weighted digraphs; None if G is not reverse-symmetric.
    Uses the topology's known isomorphism when it has one."""
    if topo.reverse_isomorphism is not None:
        return np.asarray(topo.reverse_isomorphism)
    if topo.bidirectional:
        return np.arange(topo.n)
    if topo.n > max_nodes:
        raise TopofinderError(f"{topo.expr}: N = {topo.n} > {max_nodes}; give the reverse "
                              f"isomorphism explicitly")
    g, gt = _weighted(topo.src, topo.dst, topo.n), _weighted(topo.dst, topo.src, topo.n)
    matcher = nx.algorithms.isomorphism.DiGraphMatcher(
        g, gt, edge_match=lambda a, b: a["weight"] == b["weight"])
    mapping = next(matcher.isomorphisms_iter(), None)
    if mapping is None:
        return None
    return np.array([mapping[u] for u in range(topo.n)], dtype=np.int64)


def _weighted(src, dst, n: int) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for u, w in zip(src.tolist(), dst.tolist()):
        if g.has_edge(u, w):
            g[u][w]["weight"] += 1
        else:
            g.add_edge(u, w, weight=1)
    return g


def _schedule_json(schedule: StepSchedule) -> dict:
    data = schedule.to_json()
    return json.loads(data) if isinstance(data, str) else data


def make_entry(topology: Topology, schedule: StepSchedule, provenance: dict) -> dict:
    """The entry dict for ``topology`` with its allgather ``schedule`` (validated first:
    ScheduleError names the first violation)."""
    from topofinder.schedule import validate

    if schedule.topology is not topology and not schedule.topology.same_arcs(topology):
        raise TopofinderError(f"catalog: the schedule is for {schedule.topology.expr}, not "
                              f"for the arcs of {topology.expr}")
    if schedule.collective != "allgather":
        raise TopofinderError("catalog: entries store allgather schedules")
    if topology.heterogeneous:
        raise TopofinderError("catalog: entries are homogeneous topologies (capacity 1)")
    validate(schedule)
    n, d = topology.n, topology.degree
    t_l, tau = schedule.num_steps, Fraction(schedule.tau)
    rev = find_reverse_isomorphism(topology)
    entry = {"expr": topology.expr, "N": n, "d": d,
             "arcs": np.stack([topology.src, topology.dst], 1).tolist(),
             "bidirectional": bool(topology.bidirectional),
             "reverse_symmetric": rev is not None}
    if rev is not None:
        entry["reverse_isomorphism"] = [int(x) for x in rev]
    entry.update({"schedule": _schedule_json(schedule), "T_L": t_l,
                  "tau": f"{tau.numerator}/{tau.denominator}",
                  "bw_optimal": tau == Fraction(n - 1, n),
                  "moore_optimal": t_l == moore_bound_steps(n, d),
                  "provenance": dict(provenance)})
    return entry


def write_entry(topology: Topology, schedule: StepSchedule, provenance: dict,
                directory: Path | None = None) -> Path:
    """Validate ``schedule`` and write the entry of ``topology`` atomically; returns its path.
    ``provenance``: {"command", "method", "source", "seconds"}."""
    entry = make_entry(topology, schedule, provenance)
    path = entry_path(topology.expr, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump(entry, fh, separators=(",", ":"))
        fh.write("\n")
    os.replace(tmp, path)
    return path


# ---- the static (generative) entries -----------------------------------------------------------
def static_bases() -> list[Topology]:
    """The small generative bases of Table 9 stored with their BFB schedules: K(m), K(d,d),
    H(n,q) = K_q^□n, the directed circulant DC(d+2, {1..d}), BiRing(d,m), UniRing(d,m), at the
    degrees the finder uses (2, 3, 4, 8, 16 where the family is small)."""
    from topofinder.generators import (bi_ring, complete, complete_bipartite,
                                       directed_circulant, hamming, uni_ring)
    bases = [complete(m) for m in (3, 4, 5, 9, 17)]
    bases += [complete_bipartite(d) for d in (2, 3, 4, 8)]
    bases += [hamming(2, 3), hamming(2, 5), hamming(3, 3), hamming(4, 2)]
    bases += [directed_circulant(d + 2, range(1, d + 1)) for d in (2, 3, 4, 8)]
    bases += [bi_ring(2, m) for m in (4, 6, 8)] + [bi_ring(4, 8)]
    bases += [uni_ring(1, m) for m in (4, 8)] + [uni_ring(2, 4)]
    return bases


def build_static_entries(directory: Path | None = None) -> list[Path]:
    """(Re)write the static entries with their optimal BFB schedules (each validated)."""
    from topofinder.bfb import bfb_schedule

    paths = []
    for topo in static_bases():
        start = time.perf_counter()
        schedule = bfb_schedule(topo)
        seconds = round(time.perf_counter() - start, 3)
        paths.append(write_entry(topo, schedule, {
            "command": STATIC_COMMAND, "method": "bfb",
            "source": "paper 001 Table 9 (generative base, BFB schedule, App. E)",
            "seconds": seconds}, directory))
    return paths


# ---- listing -----------------------------------------------------------------------------------
def listing(directory: Path | None = None) -> list[dict]:
    """One row per entry for `topofinder catalog list`: expr, N, d, T_L (steps), tau (M/B,
    float) and tau_exact ("p/q"), bw_optimal, moore_optimal, schedule ("stored" or "bfb"),
    provenance."""
    rows = []
    for e in entries(directory):
        tau = e.get("tau", e.get("tau_bfb"))
        exact = Fraction(tau) if isinstance(tau, str) else None
        n, d, t_l = e.get("N"), e.get("d"), e.get("T_L", e.get("diameter"))
        rows.append({
            "expr": e.get("expr"), "N": n, "d": d, "T_L": t_l,
            "tau": float(exact) if exact is not None else tau,
            "tau_exact": tau if exact is not None else None,
            "bw_optimal": e.get("bw_optimal", exact == Fraction(n - 1, n) if exact else None),
            "moore_optimal": e.get("moore_optimal", (t_l == moore_bound_steps(n, d))
                                   if None not in (n, d, t_l) else None),
            "schedule": "stored" if "schedule" in e else "bfb",
            "provenance": e.get("provenance", {}),
        })
    return rows
