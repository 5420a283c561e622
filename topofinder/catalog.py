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
from functools import lru_cache
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


def _dir(directory) -> Path:
    """The catalog directory: ``directory`` (str or Path) or catalog/ of the repository."""
    return Path(directory) if directory is not None else CATALOG_DIR


def entry_path(expr: str, directory: Path | None = None) -> Path:
    """catalog/<expr with non-alphanumeric runs replaced by '_'>.json."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", expr).strip("_")
    if not stem:
        raise TopofinderError(f"catalog: expression {expr!r} gives an empty file name")
    return _dir(directory) / f"{stem}.json"


def _read(path: Path):
    """The JSON document at ``path`` (parsed once per file version; a shallow copy)."""
    try:
        stat = path.stat()
        data = _parse(str(path), stat.st_mtime_ns, stat.st_size)
        return dict(data) if isinstance(data, dict) else list(data)
    except (OSError, ValueError) as exc:
        raise TopofinderError(f"catalog: cannot read {path}: {exc}") from None


@lru_cache(maxsize=256)
def _parse(path: str, mtime_ns: int, size: int):
    return json.loads(Path(path).read_text())


def _schedule_entries(directory: Path) -> list[dict]:
    if not directory.is_dir():
        return []
    return [_read(p) for p in sorted(directory.glob("*.json"))
            if p.name != DISTANCE_REGULAR_FILE]


def _distance_regular_entries(directory: Path) -> list[dict]:
    """The distance-regular list (catalog/distance_regular.json), one dict per graph with
    ``expr``, N, d, T_L = diameter and τ = (N−1)/N: every distance-regular graph has a
    BW-optimal BFB schedule (paper 001 App. F.3); no schedule is stored (build it by BFB)."""
    path = directory / DISTANCE_REGULAR_FILE
    if not path.exists():
        return []
    data = _read(path)
    items = data.get("graphs", []) if isinstance(data, dict) else data
    out = []
    for item in items:
        if not isinstance(item, dict) or not {"N", "d", "diameter"} <= set(item):
            continue
        n = int(item["N"])
        row = dict(item)
        row["expr"] = item.get("expression", f"DistReg({item.get('name')})")
        row.update({"T_L": int(item["diameter"]), "tau": f"{n - 1}/{n}", "bw_optimal": True,
                    "kind": "distance-regular",
                    "provenance": {"method": "BFB (BW-optimal by paper 001 App. F.3)",
                                   "source": item.get("source", "paper 001 App. F.3")}})
        out.append(row)
    return out


def entries(directory: Path | None = None) -> list[dict]:
    """Every catalog entry as stored (schedule entries, then distance-regular graphs), sorted
    by (d, N, expr)."""
    directory = _dir(directory)
    rows = _schedule_entries(directory) + _distance_regular_entries(directory)
    return sorted(rows, key=lambda e: (e.get("d", 0), e.get("N", 0), str(e.get("expr"))))


def load_entry(expr: str, directory: Path | None = None) -> dict:
    """The stored entry whose expression is ``expr`` (TopofinderError naming the known ones)."""
    directory = _dir(directory)
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
    entry.update({"schedule": schedule.to_dict(), "T_L": t_l,
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
    os.chmod(tmp, 0o644)
    with os.fdopen(fd, "w") as fh:
        json.dump(entry, fh, separators=(",", ":"))
        fh.write("\n")
    os.replace(tmp, path)
    return path


# ---- the static (generative) entries -----------------------------------------------------------
def _step_schedule(topo: Topology, chunks: int, rows, method: str = "bfb") -> "StepSchedule":
    from topofinder.schedule import StepSchedule

    return StepSchedule(topo, chunks, np.asarray(rows, np.int64).reshape(-1, 6), method=method)


def complete_schedule(m: int) -> "StepSchedule":
    """K(m): one step, every node sends its shard to all m−1 others; τ = (m−1)/m."""
    from topofinder.generators import complete

    g = complete(m)
    one = np.ones(g.num_arcs, np.int64)
    return _step_schedule(g, 1, np.stack([one, g.src, 0 * one, one, g.src, g.dst], 1))


def bipartite_schedule(d: int) -> "StepSchedule":
    """K(d,d) BFB: step 1 own shard to the d neighbours; step 2 the d in-neighbours of u send
    1/d each of every other shard of u's side. T_L = 2, τ = (2d−1)/(2d)."""
    from topofinder.generators import complete_bipartite

    g = complete_bipartite(d)
    first = np.stack([np.ones(g.num_arcs, np.int64), g.src, 0 * g.src, d + 0 * g.src, g.src,
                      g.dst], 1)
    u, v, a = np.meshgrid(np.arange(2 * d), np.arange(d), np.arange(d), indexing="ij")
    v = (u // d) * d + v                                   # same side as u
    w = (1 - u // d) * d + a                               # a-th in-neighbour of u
    keep = (v != u).reshape(-1)
    second = np.stack([2 + 0 * u, v, a, a + 1, w, u], -1).reshape(-1, 6)[keep]
    return _step_schedule(g, d, np.concatenate([first, second]))


def hamming_schedule(n: int, q: int) -> "StepSchedule":
    """H(n,q) = K_q^□n: the Cartesian-power schedule (Def 14) of K(q)'s one-step schedule;
    T_L = n, τ = (q^n−1)/q^n (Thm 12, Cor 12.1)."""
    from topofinder.expansion_schedules import power_schedule
    from topofinder.generators import hamming

    if n == 1:
        a = complete_schedule(q)
        return _step_schedule(hamming(1, q), a.shard_chunks, a.sends)
    a = power_schedule(complete_schedule(q), n)
    return _step_schedule(hamming(n, q), a.shard_chunks, a.sends, a.method)


def circulant_schedule(d: int) -> "StepSchedule":
    """DC(d+2,{1..d}) BFB: step 1 own shard to the d out-neighbours; step 2 node u receives the
    shard of u+1 (its one node at distance 2), chunk a−1 from in-neighbour u−a. T_L = 2,
    τ = (d+1)/(d+2)."""
    from topofinder.generators import directed_circulant

    m = d + 2
    g = directed_circulant(m, range(1, d + 1))
    first = np.stack([np.ones(g.num_arcs, np.int64), g.src, 0 * g.src, d + 0 * g.src, g.src,
                      g.dst], 1)
    u, a = np.meshgrid(np.arange(m), np.arange(1, d + 1), indexing="ij")
    second = np.stack([2 + 0 * u, (u + 1) % m, a - 1, a, (u - a) % m, u], -1).reshape(-1, 6)
    return _step_schedule(g, d, np.concatenate([first, second]))


def bi_ring_schedule(d: int, m: int) -> "StepSchedule":
    """BiRing(d,m) BFB (App. F.1): shards travel both ways on the d/2-fold links; for even m
    the antipode's shard arrives half from each side (P = 2). T_L = ⌊m/2⌋, τ = (m−1)/m."""
    from topofinder.generators import bi_ring

    g = bi_ring(d, m)
    t, u = np.meshgrid(np.arange(1, m // 2 + 1), np.arange(m), indexing="ij")
    t, u = t.reshape(-1), u.reshape(-1)
    split = (m % 2 == 0) & (t == m // 2)
    right = np.stack([t, (u - t + 1) % m, 0 * t, np.where(split, 1, 2), u, (u + 1) % m], 1)
    left = np.stack([t, (u + t - 1) % m, np.where(split, 1, 0), 2 + 0 * t, u, (u - 1) % m], 1)
    return _step_schedule(g, 2, np.concatenate([right, left]))


def uni_ring_schedule(d: int, m: int) -> "StepSchedule":
    """UniRing(d,m): at step t node u forwards the shard of u−t+1 over its d-fold link;
    T_L = m−1, τ = (m−1)/m."""
    from topofinder.generators import uni_ring

    t, u = np.meshgrid(np.arange(1, m), np.arange(m), indexing="ij")
    t, u = t.reshape(-1), u.reshape(-1)
    return _step_schedule(uni_ring(d, m), 1,
                          np.stack([t, (u - t + 1) % m, 0 * t, 1 + 0 * t, u, (u + 1) % m], 1))


STATIC_BASES = (
    [(complete_schedule, (m,)) for m in (3, 4, 5, 9, 17)]
    + [(bipartite_schedule, (d,)) for d in (2, 3, 4, 8)]
    + [(hamming_schedule, nq) for nq in ((2, 3), (2, 5), (3, 3), (4, 2), (2, 9))]
    + [(circulant_schedule, (d,)) for d in (2, 3, 4, 8)]
    + [(bi_ring_schedule, dm) for dm in ((2, 4), (2, 6), (2, 8), (4, 8))]
    + [(uni_ring_schedule, dm) for dm in ((1, 4), (1, 8), (2, 4))]
)
"""The small generative bases of Table 9 with their analytical (BFB) schedules, at the degrees
the finder uses: K(m), K(d,d), H(n,q), DC(d+2,{1..d}), BiRing(d,m), UniRing(d,m)."""


def build_static_entries(directory: Path | None = None) -> list[Path]:
    """(Re)write the entries of :data:`STATIC_BASES`, each schedule validated first."""
    paths = []
    for build, args in STATIC_BASES:
        start = time.perf_counter()
        schedule = build(*args)
        seconds = round(time.perf_counter() - start, 4)
        paths.append(write_entry(schedule.topology, schedule, {
            "command": STATIC_COMMAND,
            "method": f"analytical {build.__name__}{args} ({schedule.method})",
            "source": "paper 001 Table 9 (generative base), App. D.3, F.1",
            "seconds": seconds}, directory))
    return paths


# ---- listing -----------------------------------------------------------------------------------
def listing(directory: Path | None = None) -> list[dict]:
    """One row per entry for `topofinder catalog list`: expr, N, d, T_L (steps), tau (M/B,
    float) and tau_exact ("p/q"), bw_optimal, moore_optimal, schedule ("stored" or "bfb"),
    provenance."""
    rows = []
    for e in entries(directory):
        n, d, t_l, tau = e["N"], e["d"], e["T_L"], Fraction(e["tau"])
        rows.append({
            "expr": e["expr"], "N": n, "d": d, "T_L": t_l, "tau": float(tau),
            "tau_exact": f"{tau.numerator}/{tau.denominator}",
            "bw_optimal": tau == Fraction(n - 1, n),
            "moore_optimal": t_l == moore_bound_steps(n, d),
            "schedule": "stored" if "schedule" in e else "bfb",
            "provenance": e.get("provenance", {}),
        })
    return rows
