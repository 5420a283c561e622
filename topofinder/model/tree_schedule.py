"""Tree-flow allgather schedules (paper 002 §4–5; docs/formats.md): data model, time, JSON,
validator.

Every compute node r broadcasts its shard along weighted spanning out-trees rooted at r; a
tree of weight w carries the fraction w of r's shard (size w·M/N, N = compute nodes) over
each of its edges, all trees streaming at once. On a switched fabric a tree edge u→t joins
two compute nodes and is carried by routes through switches (paper 002 App. E.3: the edge
splitting's routing table), each route a physical path with a part of the weight. A link
u→w of capacity C (capacity units, multi-arcs summed) then needs (M/N)·load / C, so with B
the node bandwidth (Topology.node_bandwidth: a compute node's summed link capacity)

    T_B = (B/N) · max_{(u,w)} load(u,w) / C(u,w)     [M/B].

Reduce-scatter uses in-trees (the same model with every edge pointing towards the root).

The validator checks this model independently of how the trees were built (see
:func:`problems`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from math import lcm

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.schedule import SCHEDULE_FORMAT, SCHEDULE_VERSION
from topofinder.model.inputs import read_json
from topofinder.model.topology import Topology
from topofinder.model.units import exact
from topofinder.model.collectives import Collective


def link_capacities(topo: Topology) -> dict[tuple[int, int], int]:
    """{(u, w): capacity in units of b} for every link u→w, multi-arcs summed, no self-loops."""
    m = topo.link_matrix.tocoo()
    return {(int(u), int(w)): int(c) for u, w, c in zip(m.row, m.col, m.data)}


@dataclass(frozen=True)
class Tree:
    """A spanning tree over the compute nodes rooted at ``root`` carrying ``weight`` (a
    fraction of the root's shard); ``edges`` are (u, w) pairs in the direction data flows
    (out-tree: parent → child; in-tree of reduce-scatter: child → parent). ``routes``:
    for edges realised through switches, ((u, w), ((path, weight), ...)) with physical node
    paths u … w whose weights sum to the tree's weight; other edges are direct links."""

    root: int
    weight: Fraction
    edges: tuple[tuple[int, int], ...]
    routes: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "root", int(self.root))
        object.__setattr__(self, "weight", Fraction(self.weight))
        edges = self.edges
        if isinstance(edges, np.ndarray):
            pairs = np.array(edges, np.int64).reshape(-1, 2)
            pairs.setflags(write=False)
            object.__setattr__(self, "_array", pairs)       # not a field: a cached view
            edges = tuple(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))
        else:
            edges = tuple((int(u), int(w)) for u, w in edges)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "routes", tuple(
            ((int(e[0]), int(e[1])), tuple((tuple(int(x) for x in p), Fraction(wt))
                                           for p, wt in paths))
            for e, paths in (self.routes.items() if isinstance(self.routes, dict)
                             else self.routes)))

    def edge_array(self) -> np.ndarray:
        """The edges as an (E, 2) int64 array."""
        arr = self.__dict__.get("_array")
        if arr is None:
            arr = np.array(self.edges, np.int64).reshape(-1, 2)
            arr.setflags(write=False)
            object.__setattr__(self, "_array", arr)
        return arr

    def physical_paths(self):
        """(path, weight) for every edge: its routes, or the direct link with full weight."""
        routed = dict(self.routes)
        for e in self.edges:
            if e in routed:
                yield from routed[e]
            else:
                yield e, self.weight

    def reversed(self) -> "Tree":
        """The same tree with every edge and route reversed (out-tree ↔ in-tree)."""
        return Tree(self.root, self.weight, [(w, u) for u, w in self.edges],
                    [((w, u), [(p[::-1], wt) for p, wt in paths])
                     for (u, w), paths in self.routes])

    def height(self) -> int:
        """Largest number of tree edges between the root and a node (the tree must be valid;
        in- and out-trees alike)."""
        children = defaultdict(list)
        inward = any(w == self.root for _, w in self.edges)
        for u, w in self.edges:
            if inward:
                u, w = w, u
            children[u].append(w)
        depth, frontier = 0, [self.root]
        while True:
            frontier = [w for u in frontier for w in children[u]]
            if not frontier:
                return depth
            depth += 1


@dataclass(frozen=True)
class TreeSchedule:
    """Allgather as weighted spanning out-trees on ``topology`` (``collective``
    "reduce-scatter": in-trees, data flowing towards each root)."""

    topology: Topology
    trees: tuple[Tree, ...] = field(default_factory=tuple)
    method: str = ""            # how the trees were built (reported, not checked)
    collective: str = Collective.ALLGATHER

    def __post_init__(self):
        object.__setattr__(self, "trees", tuple(self.trees))

    # ---- time --------------------------------------------------------------------------
    def link_loads(self) -> dict[tuple[int, int], Fraction]:
        """Σ of tree weights over each used link (u, w), in units of the shard M/N."""
        return dict(self._loads)

    @cached_property
    def _loads(self) -> dict[tuple[int, int], Fraction]:
        load: dict[tuple[int, int], Fraction] = defaultdict(Fraction)
        direct = [t for t in self.trees if not t.routes]
        for t in self.trees:
            if t.routes:
                for path, wt in t.physical_paths():
                    for e in zip(path[:-1], path[1:]):
                        load[e] += wt
        if direct:      # routeless trees: integer weights over a common denominator, numpy
            den = lcm(*{t.weight.denominator for t in direct})
            n = self.topology.n
            edges = np.concatenate([t.edge_array() for t in direct])
            wts = np.repeat([t.weight.numerator * (den // t.weight.denominator)
                             for t in direct], [len(t.edges) for t in direct]).astype(object
                             if den > 1 << 40 else np.int64)
            keys, inv = np.unique(edges[:, 0] * n + edges[:, 1], return_inverse=True)
            sums = np.zeros(keys.size, wts.dtype)
            np.add.at(sums, inv.reshape(-1), wts)
            for key, total in zip(keys.tolist(), sums.tolist()):
                load[(key // n, key % n)] += Fraction(int(total), den)
        return dict(load)

    def tau(self) -> Fraction:
        """T_B in M/B: (B/N)·max over links of load / capacity (module docstring)."""
        cap = link_capacities(self.topology)
        worst = Fraction(0)
        for (u, w), load in self.link_loads().items():
            c = cap.get((u, w), 0)
            if c == 0:
                raise TopofinderError(f"tree edge {u}->{w} is not a link of "
                                      f"{self.topology.expr}")
            worst = max(worst, load / c)
        return _scale(self.topology) * worst

    def heights(self) -> list[int]:
        """Height of every tree, in the order of ``trees``."""
        return [t.height() for t in self.trees]

    # ---- JSON (docs/formats.md) -----------------------------------------------------------
    def to_dict(self, _tuples: bool = False) -> dict:
        tau = self.tau()
        topo = self.topology
        doc = {"format": SCHEDULE_FORMAT, "version": SCHEDULE_VERSION,
               **({} if topo.labels is None else {"labels": list(topo.labels)}),
               "collective": self.collective, "kind": "trees", "topology": topo.expr,
               "num_nodes": topo.n, "method": self.method, "tau": float(tau),
               "tau_exact": exact(tau),
               "node_bandwidth": topo.node_bandwidth,
               "capacity_unit": topo.capacity_unit or "b"}
        if topo.has_switches:
            doc["switches"] = topo.switches.tolist()
        doc["trees"] = [_tree_dict(t, _tuples) for t in self.trees]
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(_tuples=True))   # tuples are written as JSON arrays

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
            trees = [Tree(t["root"], Fraction(t["weight"]), [tuple(e) for e in t["edges"]],
                          _routes_from(t.get("routes", [])))
                     for t in doc["trees"]]
            collective = doc.get("collective", Collective.ALLGATHER)
            if collective not in (Collective.ALLGATHER, Collective.REDUCE_SCATTER):
                raise TopofinderError(f"tree schedule collective {collective!r}: expected "
                                      "allgather or reduce-scatter")
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            if isinstance(exc, TopofinderError):
                raise
            raise TopofinderError(
                f"malformed tree schedule JSON ({exc!r}); expected {{\"kind\": \"trees\", "
                "\"num_nodes\": N, \"trees\": [{\"root\": r, \"weight\": \"p/q\", "
                "\"edges\": [[u, w], ...]}, ...]}") from None
        return cls(topology, trees, method=str(doc.get("method", "")), collective=collective)

    @classmethod
    def from_json(cls, text: str, topology: Topology) -> "TreeSchedule":
        return cls.from_dict(read_json(text, "tree schedule"), topology)


def _scale(topo: Topology) -> Fraction:
    """B/N: node bandwidth (capacity units) over the number of compute nodes."""
    return Fraction(topo.node_bandwidth, topo.num_compute)


def _tree_dict(t: Tree, tuples: bool = False) -> dict:
    d = {"root": t.root, "weight": f"{t.weight.numerator}/{t.weight.denominator}",
         "edges": t.edges if tuples else [list(e) for e in t.edges]}
    if t.routes:
        d["routes"] = [{"edge": list(e), "path": list(p),
                        "weight": f"{wt.numerator}/{wt.denominator}"}
                       for e, paths in t.routes for p, wt in paths]
    return d


def _routes_from(rows) -> dict:
    routes: dict = defaultdict(list)
    for r in rows:
        routes[tuple(r["edge"])].append((tuple(r["path"]), Fraction(r["weight"])))
    return dict(routes)


def problems(schedule: TreeSchedule, tau: Fraction | None = None) -> list[str]:
    """Everything wrong with ``schedule`` as an allgather (reduce-scatter: as in-trees, by
    checking the reversed trees on G^T) — empty list: valid.

    Checks: every tree is an out-arborescence rooted at its root spanning all N compute
    nodes (and no switch) with edges that are links or carried by routes: paths of links
    from u to w through switches only, weights positive and summing to the tree's weight;
    tree weights are positive and sum to 1 per compute node; and, when ``tau`` (M/B) is
    given, every link's load fits its capacity at that time: (B/N)·load ≤ tau·C.
    """
    if schedule.collective == Collective.REDUCE_SCATTER:
        flipped = TreeSchedule(schedule.topology.transpose(),
                               [t.reversed() for t in schedule.trees], schedule.method)
        return problems(flipped, tau)
    if schedule.collective != Collective.ALLGATHER:
        return [f"collective {schedule.collective!r}: trees describe allgather or "
                "reduce-scatter"]
    topo = schedule.topology
    n, cap = topo.n, link_capacities(topo)
    is_switch = topo.is_switch
    ncomp = topo.num_compute
    link_keys = np.sort(np.array([u * n + w for u, w in cap], np.int64))
    rounds = max(1, int(n).bit_length())
    out: list[str] = []
    per_root: dict[int, Fraction] = defaultdict(Fraction)
    for i, t in enumerate(schedule.trees):
        if not 0 <= t.root < n or is_switch[t.root]:
            out.append(f"tree {i}: root {t.root} is not a compute node")
            continue
        if t.weight <= 0:
            out.append(f"tree {i}: weight {t.weight} is not positive")
        per_root[t.root] += t.weight
        if not t.routes and _tree_ok(t, n, ncomp, link_keys, is_switch, rounds):
            continue                     # numpy check passed; the loop below explains faults
        if len(t.edges) != ncomp - 1:
            out.append(f"tree {i}: {len(t.edges)} edges, a spanning tree has {ncomp - 1}")
        parent = np.full(n, -1, np.int64)
        children = defaultdict(list)
        routed = dict(t.routes)
        bad = False
        for u, w in t.edges:
            if not (0 <= u < n and 0 <= w < n) or is_switch[u] or is_switch[w]:
                out.append(f"tree {i}: edge {u}->{w} does not join two compute nodes")
                bad = True
                continue
            if (u, w) in routed:
                found = _route_problems(routed[(u, w)], u, w, t.weight, cap, is_switch)
                if found:
                    out += [f"tree {i}: edge {u}->{w}: {p}" for p in found]
                    bad = True
                    continue
            elif (u, w) not in cap:
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
        if len(seen) != ncomp:
            out.append(f"tree {i}: reaches {len(seen)} of {ncomp} nodes from root {t.root}")
    for r in topo.compute_nodes.tolist():
        if per_root.get(r, Fraction(0)) != 1:
            out.append(f"root {r}: tree weights sum to {per_root.get(r, Fraction(0))}, not 1")
    if tau is not None:
        scale = _scale(topo)
        for (u, w), load in schedule.link_loads().items():
            c = cap.get((u, w), 0)
            if c and scale * load > tau * c:
                out.append(f"link {u}->{w}: load {load} shards over capacity {c} exceeds "
                           f"tau = {tau} M/B")
    return out


def _tree_ok(t: Tree, n, ncomp, link_keys, is_switch, rounds) -> bool:
    """Vectorised: ``t`` (no routes) is a spanning out-arborescence of the compute nodes on
    existing links — N−1 edges, distinct heads other than the root, and every compute node
    reaches the root by following parents (pointer doubling)."""
    e = t.edge_array()
    if e.shape[0] != ncomp - 1:
        return False
    if e.size == 0:
        return True
    if e.min() < 0 or e.max() >= n:
        return False
    u, w = e[:, 0], e[:, 1]
    if is_switch[u].any() or is_switch[w].any() or (w == t.root).any():
        return False
    keys = u * n + w
    pos = np.minimum(np.searchsorted(link_keys, keys), link_keys.size - 1)
    if link_keys.size == 0 or not np.array_equal(link_keys[pos], keys):
        return False
    if np.bincount(w, minlength=n).max() > 1:
        return False
    anc = np.full(n, t.root, np.int64)
    anc[w] = u
    for _ in range(rounds):
        anc = anc[anc]
    return bool((anc == t.root).all())


def _route_problems(paths, u, w, weight, cap, is_switch) -> list[str]:
    out = []
    if sum((wt for _, wt in paths), Fraction(0)) != weight:
        out.append(f"route weights sum to {sum((wt for _, wt in paths), Fraction(0))}, "
                   f"not the tree weight {weight}")
    for path, wt in paths:
        if wt <= 0 or len(path) < 2 or path[0] != u or path[-1] != w:
            out.append(f"route {list(path)} (weight {wt}) does not lead from {u} to {w}")
        elif any(not is_switch[x] for x in path[1:-1]):
            out.append(f"route {list(path)} passes a compute node")
        elif any(e not in cap for e in zip(path[:-1], path[1:])):
            out.append(f"route {list(path)} uses a missing link")
    return out


def validate(schedule: TreeSchedule, tau: Fraction | None = None) -> None:
    """Raise TopofinderError listing the first problems found by :func:`problems`."""
    found = problems(schedule, tau)
    if found:
        more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
        raise TopofinderError("invalid tree schedule: " + "; ".join(found[:5]) + more)
