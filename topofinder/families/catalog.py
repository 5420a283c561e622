"""The base catalog (catalog/*.json): small base topologies with their allgather schedules and
provenance (paper 001 Table 9; docs/algorithms.md).

One JSON file per entry, named after the expression with every run of non-alphanumerics
replaced by "_" (``DBJMod(2,4)`` → ``catalog/DBJMod_2_4.json``)::

    {"expr", "N", "d", "arcs": [[u, w], ...], "bidirectional", "reverse_symmetric",
     "reverse_isomorphism": [p(0), ...] (optional: (u, w) an arc iff (p(w), p(u)) one),
     "schedule": {step-schedule JSON of docs/formats.md}, "T_L" (steps), "tau" ("p/q", M/B),
     "bw_optimal", "moore_optimal", "provenance": {"command", "method", "source", "seconds"}}

The distance-regular graphs are listed in catalog/distance_regular.json (their own format,
built by :mod:`topofinder.families.distance_regular`); :func:`entries` lists them too.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from topofinder.compute.output import write_text
from topofinder.errors import TopofinderError
from topofinder.model.bounds import moore_bound_steps
from topofinder.model.topology import Topology
from topofinder.model.schedule import StepSchedule
from topofinder.model.schedule import validate
from topofinder.model.units import exact
from topofinder.model.collectives import Collective

if TYPE_CHECKING:           # networkx loads only where an isomorphism is searched
    import networkx as nx


#: The shipped catalog (package data ``topofinder.catalog_data``, the repository's catalog/).
CATALOG_DIR = Path(str(files("topofinder.catalog_data")))
DISTANCE_REGULAR_FILE = "distance_regular.json"
#: The affine digraphs per (N, d) (topofinder.finder.affine_catalog), not single entries.
AFFINE_FILE = "affine.json"


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
            if p.name not in (DISTANCE_REGULAR_FILE, AFFINE_FILE)]


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


@lru_cache(maxsize=1)
def affine_bases() -> dict[tuple[int, int], list[str]]:
    """(N, d) → expressions of the shipped affine catalog's digraphs (empty if absent;
    written by topofinder.finder.affine_catalog)."""
    try:
        doc = json.loads((CATALOG_DIR / AFFINE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {(int(n), int(d)): [e["expr"] for e in rows]
            for d, block in doc.get("degrees", {}).items()
            for n, rows in block["entries"].items()}


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
    import networkx as nx      # VF2; loaded only when an isomorphism must be searched
    g, gt = _weighted(topo.src, topo.dst, topo.n), _weighted(topo.dst, topo.src, topo.n)
    matcher = nx.algorithms.isomorphism.DiGraphMatcher(
        g, gt, edge_match=lambda a, b: a["weight"] == b["weight"])
    mapping = next(matcher.isomorphisms_iter(), None)
    if mapping is None:
        return None
    return np.array([mapping[u] for u in range(topo.n)], dtype=np.int64)


def _weighted(src, dst, n: int) -> nx.DiGraph:
    import networkx as nx
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
    if schedule.topology is not topology and not schedule.topology.same_arcs(topology):
        raise TopofinderError(f"catalog: the schedule is for {schedule.topology.expr}, not "
                              f"for the arcs of {topology.expr}")
    if schedule.collective != Collective.ALLGATHER:
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
                  "tau": exact(tau),
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
    write_text(path, json.dumps(entry, separators=(",", ":")) + "\n")
    return path


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
            "tau_exact": exact(tau),
            "bw_optimal": tau == Fraction(n - 1, n),
            "moore_optimal": t_l == moore_bound_steps(n, d),
            "schedule": "stored" if "schedule" in e else "bfb",
            "provenance": e.get("provenance", {}),
        })
    return rows
