"""Tree-flow allgather schedules (paper 002 §4–5; docs/formats.md): data model, time, JSON, validator.

Every node r broadcasts its shard along weighted spanning out-trees rooted at r; a tree of
weight w carries the fraction w of r's shard (size w·M/N) over each of its edges, all trees
streaming at once. A link u→w of capacity C (units of b, multi-arcs summed) then needs
(M/N)·Σ_{trees ∋ (u,w)} w / (C·b), so with B = d·b (d = topology.degree)

    T_B = (d/N) · max_{(u,w)} Σ_{trees ∋ (u,w)} w / C(u,w)     [M/B].

The validator checks this model independently of how the trees were built (see
:func:`problems`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.schedule import SCHEDULE_FORMAT, SCHEDULE_VERSION
from topofinder.model.topology import Topology
from topofinder.model.units import exact


def link_capacities(topo: Topology) -> dict[tuple[int, int], int]:
    """{(u, w): capacity in units of b} for every link u→w, multi-arcs summed, no self-loops."""
    m = topo.link_matrix.tocoo()
    return {(int(u), int(w)): int(c) for u, w, c in zip(m.row, m.col, m.data)}


@dataclass(frozen=True)
class Tree:
    """A spanning out-tree rooted at ``root`` carrying ``weight`` (a fraction of the root's
    shard); ``edges`` are (u, w) pairs, parent u → child w."""

    root: int
    weight: Fraction
    edges: tuple[tuple[int, int], ...]

    def __post_init__(self):
        object.__setattr__(self, "root", int(self.root))
        object.__setattr__(self, "weight", Fraction(self.weight))
        object.__setattr__(self, "edges", tuple((int(u), int(w)) for u, w in self.edges))

    def height(self) -> int:
        """Largest number of hops from the root to a node (the tree must be valid)."""
        children = defaultdict(list)
        for u, w in self.edges:
            children[u].append(w)
        depth, frontier = 0, [self.root]
        while True:
            frontier = [w for u in frontier for w in children[u]]
            if not frontier:
                return depth
            depth += 1


@dataclass(frozen=True)
class TreeSchedule:
    """Allgather as weighted spanning out-trees on ``topology``."""

    topology: Topology
    trees: tuple[Tree, ...] = field(default_factory=tuple)
    method: str = ""            # how the trees were built (reported, not checked)

    def __post_init__(self):
        object.__setattr__(self, "trees", tuple(self.trees))

    # ---- time --------------------------------------------------------------------------
    def link_loads(self) -> dict[tuple[int, int], Fraction]:
        """Σ of tree weights over each used link (u, w), in units of the shard M/N."""
        load: dict[tuple[int, int], Fraction] = defaultdict(Fraction)
        for t in self.trees:
            for e in t.edges:
                load[e] += t.weight
        return dict(load)

    def tau(self) -> Fraction:
        """T_B in M/B: (d/N)·max over links of load / capacity (module docstring)."""
        cap = link_capacities(self.topology)
        worst = Fraction(0)
        for (u, w), load in self.link_loads().items():
            c = cap.get((u, w), 0)
            if c == 0:
                raise TopofinderError(f"tree edge {u}->{w} is not a link of "
                                      f"{self.topology.expr}")
            worst = max(worst, load / c)
        return Fraction(self.topology.degree, self.topology.n) * worst

    def heights(self) -> list[int]:
        """Height of every tree, in the order of ``trees``."""
        return [t.height() for t in self.trees]

    # ---- JSON (docs/formats.md) -----------------------------------------------------------
    def to_dict(self) -> dict:
        tau = self.tau()
        labels = {} if self.topology.labels is None else {"labels": list(self.topology.labels)}
        return {"format": SCHEDULE_FORMAT, "version": SCHEDULE_VERSION, **labels,
                "collective": "allgather", "kind": "trees", "topology": self.topology.expr,
                "num_nodes": self.topology.n, "method": self.method, "tau": float(tau),
                "tau_exact": exact(tau),
                "trees": [{"root": t.root,
                           "weight": exact(t.weight),
                           "edges": [list(e) for e in t.edges]} for t in self.trees]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, doc: dict, topology: Topology) -> "TreeSchedule":
        """Read the docs/formats.md tree-schedule shape (validate separately)."""
        try:
            if doc.get("version", SCHEDULE_VERSION) != SCHEDULE_VERSION:
                raise TopofinderError(f"tree schedule JSON version {doc['version']!r}; this "
                                      f"topofinder reads version {SCHEDULE_VERSION}")
            if doc.get("kind") != "trees":
                raise TopofinderError("tree schedule JSON needs \"kind\": \"trees\"")
            if int(doc["num_nodes"]) != topology.n:
                raise TopofinderError(f"tree schedule has num_nodes = {doc['num_nodes']} but "
                                      f"{topology.expr} has N = {topology.n}")
            trees = [Tree(t["root"], Fraction(t["weight"]), [tuple(e) for e in t["edges"]])
                     for t in doc["trees"]]
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            if isinstance(exc, TopofinderError):
                raise
            raise TopofinderError(
                f"malformed tree schedule JSON ({exc!r}); expected {{\"kind\": \"trees\", "
                "\"num_nodes\": N, \"trees\": [{\"root\": r, \"weight\": \"p/q\", "
                "\"edges\": [[u, w], ...]}, ...]}") from None
        return cls(topology, trees, method=str(doc.get("method", "")))

    @classmethod
    def from_json(cls, text: str, topology: Topology) -> "TreeSchedule":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TopofinderError(f"tree schedule is not valid JSON: {exc}") from None
        return cls.from_dict(doc, topology)


def problems(schedule: TreeSchedule, tau: Fraction | None = None) -> list[str]:
    """Everything wrong with ``schedule`` as an allgather (empty list: valid).

    Checks: every tree is an out-arborescence rooted at its root spanning all N nodes and
    using only existing links (no self-loops); weights are positive and sum to 1 per root,
    for every node; and, when ``tau`` (M/B) is given, every link's load fits its capacity
    at that time: (d/N)·Σw ≤ tau·C.
    """
    topo = schedule.topology
    n, cap = topo.n, link_capacities(topo)
    out: list[str] = []
    per_root: dict[int, Fraction] = defaultdict(Fraction)
    for i, t in enumerate(schedule.trees):
        if not 0 <= t.root < n:
            out.append(f"tree {i}: root {t.root} outside 0..{n - 1}")
            continue
        if t.weight <= 0:
            out.append(f"tree {i}: weight {t.weight} is not positive")
        per_root[t.root] += t.weight
        if len(t.edges) != n - 1:
            out.append(f"tree {i}: {len(t.edges)} edges, a spanning tree has {n - 1}")
        parent = np.full(n, -1, np.int64)
        children = defaultdict(list)
        bad = False
        for u, w in t.edges:
            if not (0 <= u < n and 0 <= w < n) or (u, w) not in cap:
                out.append(f"tree {i}: edge {u}->{w} is not a link of {topo.expr}")
                bad = True
                continue
            if w == t.root or parent[w] >= 0:
                out.append(f"tree {i}: node {w} has more than one parent (or is the root)")
                bad = True
            parent[w] = u
            children[u].append(w)
        if bad:
            continue
        seen = {t.root}
        frontier = [t.root]
        while frontier:
            frontier = [w for u in frontier for w in children[u] if w not in seen]
            seen.update(frontier)
        if len(seen) != n:
            out.append(f"tree {i}: reaches {len(seen)} of {n} nodes from root {t.root}")
    for r in range(n):
        if per_root.get(r, Fraction(0)) != 1:
            out.append(f"root {r}: tree weights sum to {per_root.get(r, Fraction(0))}, not 1")
    if tau is not None:
        scale = Fraction(topo.degree, n)
        for (u, w), load in schedule.link_loads().items():
            c = cap.get((u, w), 0)
            if c and scale * load > tau * c:
                out.append(f"link {u}->{w}: load {load} shards over capacity {c} exceeds "
                           f"tau = {tau} M/B")
    return out


def validate(schedule: TreeSchedule, tau: Fraction | None = None) -> None:
    """Raise TopofinderError listing the first problems found by :func:`problems`."""
    found = problems(schedule, tau)
    if found:
        more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
        raise TopofinderError("invalid tree schedule: " + "; ".join(found[:5]) + more)
