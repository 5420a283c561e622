"""The diameter of a point verified by construction, from the expansions' distance laws
(docs/algorithms.md, "Verified by construction"), without all-pairs distances of the whole.

Operands within OPERAND_LIMIT (and bases) are measured whole: D, each node's eccentricity and
c(u), the shortest closed walk through u (1 + min over out-neighbours w of dist(w, u)). Above:

- L(G), G strongly connected with every in-degree ≥ 2 or every out-degree ≥ 2: for arcs
  e ≠ f, dist(e, f) = 1 + dist(head e, tail f), so D(L(G)) = D(G) + 1 (paper 001 §5.1: "the
  diameter only increases by one"); c(e) = 1 + dist(head e, tail e) ≤ D(G) + 1.
- G*n (n ≥ 2 copies, no self-loops): dist(x_i, y_j) = dist(x, y) for x ≠ y, and dist(x_i, x_j)
  = c(x) for i ≠ j, so D(G*n) = max(D(G), max_x c(x)); c is the copies' own.
- G^p: distances add over coordinates, D(G^p) = p·D(G); c((x, ..., x)) = c(x) at most.

Each law names nodes whose eccentricity reaches the value (witnesses: an in-arc of a witness
of G; copy 0 of one; (x, ..., x)). `check` runs a BFS from the witnesses and from sampled
nodes of the built topology: every eccentricity must be ≤ D and some witness's = D — a
check of the built topology against the law, O(k·N·d).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import shortest_path

from topofinder.errors import TopofinderError
from topofinder.finder.certify import _size

#: witnesses carried up the recipe (each a BFS in `check`)
MAX_WITNESSES = 4
#: sampled BFS sources `check` adds to the witnesses
BFS_SAMPLE = 4


class Law:
    """(D, c_max, exact_c, witnesses, c_witnesses) of a recipe node: its diameter, an upper
    bound on the largest c(u) (exact when ``exact_c``; then ``c_witnesses`` reach it), nodes
    of eccentricity D."""

    def __init__(self, d: int, c_max: int, exact_c: bool, witnesses, c_witnesses=()):
        self.d, self.c_max, self.exact_c = int(d), int(c_max), exact_c
        self.witnesses = [int(w) for w in witnesses][:MAX_WITNESSES]
        self.c_witnesses = [int(w) for w in c_witnesses][:MAX_WITNESSES]


def measured(topo) -> Law:
    """The law of a topology measured whole (all-pairs BFS: operands and bases only)."""
    dist = shortest_path(topo.link_matrix, method="D", unweighted=True, directed=True)
    if not np.isfinite(dist).all():
        raise TopofinderError(f"{topo.expr} is not strongly connected: no finite diameter")
    ecc = dist.max(axis=1)
    back = dist[topo.dst, topo.src]                      # dist(w, u) for each arc u→w
    c = np.full(topo.n, np.inf)
    np.minimum.at(c, topo.src, back + 1)
    d = int(ecc.max())
    return Law(d, int(c.max()), True, np.flatnonzero(ecc == d), np.flatnonzero(c == c.max()))


def law(recipe, whole: int, build_topology) -> Law | None:
    """The diameter law of ``recipe``: measured for subtrees of N²·d ≤ ``whole`` (and bases),
    else by the operator's law from its operand's; None where no law above applies (Bi(G),
    products, a line graph of a cycle)."""
    topo_n, d = _size(recipe)
    if recipe.op == "base" or topo_n * topo_n * d <= whole:
        return measured(build_topology(recipe))
    if recipe.op not in ("line", "degree", "power"):
        return None
    child = recipe.children[0]
    inner = law(child, whole, build_topology)
    if inner is None:
        return None
    g = build_topology(child)
    if recipe.op == "line":
        if g.in_degrees.min() < 2 and g.out_degrees.min() < 2:
            return None                                  # e.g. a cycle: L(C_n) = C_n
        order = np.argsort(g.dst, kind="stable")
        arcs = [int(e) for x in inner.witnesses for e in order[np.searchsorted(
            g.dst[order], x):np.searchsorted(g.dst[order], x, "right")]]
        return Law(inner.d + 1, inner.d + 1, False, arcs)
    if recipe.op == "degree":
        if inner.c_max <= inner.d:
            return Law(inner.d, inner.c_max, inner.exact_c, inner.witnesses)
        if not inner.exact_c:
            return None
        return Law(inner.c_max, inner.c_max, True, inner.c_witnesses, inner.c_witnesses)
    k, n = recipe.k, g.n
    spread = sum(n ** i for i in range(k))               # (x, ..., x)
    return Law(k * inner.d, inner.c_max, False, [x * spread for x in inner.witnesses])


def check(topo, value: Law, seed: int = 0) -> list[int]:
    """BFS from the law's witnesses and BFS_SAMPLE sampled nodes of the built ``topo``: each
    eccentricity ≤ D, a witness's = D (TopofinderError otherwise); the sources used."""
    rng = np.random.default_rng(seed)
    sampled = rng.choice(topo.n, size=min(BFS_SAMPLE, topo.n), replace=False)
    sources = list(dict.fromkeys(value.witnesses + [int(s) for s in sampled]))
    dist = shortest_path(topo.link_matrix, method="D", unweighted=True, directed=True,
                         indices=sources)
    ecc = dist.max(axis=1)
    if not np.isfinite(ecc).all() or ecc.max() > value.d:
        raise TopofinderError(f"{topo.expr}: a node's eccentricity exceeds the diameter "
                              f"{value.d} the expansions' laws give")
    if not value.witnesses or ecc[:len(value.witnesses)].max() != value.d:
        raise TopofinderError(f"{topo.expr}: no witness reaches the diameter {value.d} the "
                              f"expansions' laws give")
    return sources
