"""The operators of the expression language on topologies (paper 001 §5, Appendix A.6, D): line
graph, degree expansion, Cartesian product and power, uni→bidirectional conversion. What they
do to a schedule is :mod:`topofinder.expansions.schedules`; the exact (N', d', T_L', τ') they
predict is :mod:`topofinder.expansions.predict`.

Node numbering (also used by the schedule constructions):
- L(G): node e is arc e of G (index into G.src/G.dst); e→f iff dst(e) = src(f).
- G*n: copy i of node u is i·N + u; u_i→w_j for every arc u→w of G and all copies i, j.
- A x B: node (a, b) is a·N_B + b (row-major, the last factor varies fastest); G^n likewise.
- Bi(G): the nodes of G; arcs of G first, then the arcs of G^T in the same order.
"""

from __future__ import annotations


import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology


def _wrap(expr: str) -> str:
    """Parenthesise a binary-product expression before applying a postfix operator."""
    return f"({expr})" if " x " in expr else expr


def _arc_index(n: int, src: np.ndarray, dst: np.ndarray, want_src, want_dst) -> np.ndarray:
    """For each wanted (u, w), the index of a distinct arc u→w (k-th request of a pair gets
    its k-th copy). Used to carry reverse isomorphisms through expansions."""
    key = src * n + dst
    order = np.lexsort((np.arange(key.size), key))
    want = np.asarray(want_src) * n + np.asarray(want_dst)
    worder = np.lexsort((np.arange(want.size), want))
    if not np.array_equal(np.sort(key), want[worder]):
        raise ValueError("requested arcs are not a permutation of the arcs")
    result = np.empty(want.size, np.int64)
    result[worder] = order
    return result


def line_graph(g: Topology, times: int = 1) -> Topology:
    """L^times(G) (Def 12 of paper 001): N' = d·N, same degree, diameter D(G)+1."""
    if times < 1:
        raise TopofinderError(f"line-graph power must be >= 1, got {times}")
    if g.heterogeneous:
        raise TopofinderError("line-graph expansion is defined here for homogeneous links only")
    for _ in range(times):
        g = _line_graph_once(g)
    return g


def _line_graph_once(g: Topology) -> Topology:
    order = np.argsort(g.src, kind="stable")           # arcs grouped by tail
    start = np.concatenate([[0], np.cumsum(g.out_degrees)])
    counts = g.out_degrees[g.dst]                        # successors of arc e: arcs out of dst(e)
    e_src = np.repeat(np.arange(g.num_arcs), counts)
    offsets = np.arange(e_src.size) - np.repeat(np.cumsum(counts) - counts, counts)
    e_dst = order[start[g.dst[e_src]] + offsets]
    rev = None
    p = known_reverse_isomorphism(g)
    if p is not None:
        rev = _arc_index(g.n, g.src, g.dst, p[g.dst], p[g.src])
    return Topology(g.num_arcs, e_src, e_dst, expr=_line_expr(g.expr),
                    bidirectional=False, reverse_isomorphism=rev)


def known_reverse_isomorphism(g: Topology) -> np.ndarray | None:
    """A known reverse isomorphism of G: identity for bidirectional G, else the stored one."""
    if g.reverse_isomorphism is not None:
        return g.reverse_isomorphism
    return np.arange(g.n) if g.bidirectional else None


def _line_expr(expr: str) -> str:
    """L(G) → L^2(G) → L^3(G): keep the iterated form the grammar prints."""
    if expr.startswith("L(") and expr.endswith(")") and _balanced(expr[2:-1]):
        return f"L^2({expr[2:-1]})"
    if expr.startswith("L^"):
        k, rest = expr[2:].split("(", 1)
        if k.isdigit() and _balanced(rest[:-1]):
            return f"L^{int(k) + 1}({rest[:-1]})"
    return f"L({expr})"


def _balanced(s: str) -> bool:
    depth = 0
    for c in s:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def degree_expansion(g: Topology, n: int) -> Topology:
    """G*n (Def 13 of paper 001): n copies, u_i→w_j for every arc u→w and all i, j.
    N' = nN, d' = nd, T_L' = T_L + 1 (Thm 11)."""
    if n < 2:
        raise TopofinderError(f"degree expansion factor must be >= 2, got {n}")
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    i, j = i.reshape(-1, 1), j.reshape(-1, 1)
    src = (i * g.n + g.src).reshape(-1)
    dst = (j * g.n + g.dst).reshape(-1)
    cap = None if g.capacity is None else np.tile(g.capacity, n * n)
    p = known_reverse_isomorphism(g)
    rev = None if p is None else (np.arange(n)[:, None] * g.n + p).reshape(-1)
    return Topology(n * g.n, src, dst, expr=f"{_wrap(g.expr)}*{n}", capacity=cap,
                    bidirectional=g.bidirectional, vertex_transitive=g.vertex_transitive,
                    reverse_isomorphism=rev)


def cartesian_product(*factors: Topology, expr: str | None = None) -> Topology:
    """G1 x ... x Gk (Def 14): (a, b) → (a', b) for a→a' and (a, b) → (a, b') for b→b'.
    N = ΠN_i, d = Σd_i."""
    if len(factors) < 2:
        raise TopofinderError("a Cartesian product needs at least two factors")
    sizes = [f.n for f in factors]
    total = int(np.prod(sizes, dtype=object))
    if total > 1_000_000:
        raise TopofinderError(f"product has {total} nodes; topofinder handles N <= 1000000")
    strides = np.cumprod([1] + sizes[::-1])[::-1][1:]    # row-major strides
    nodes = np.arange(total)
    coords = [(nodes // s) % m for s, m in zip(strides, sizes)]
    srcs, dsts, caps = [], [], []
    for f, s, c in zip(factors, strides, coords):
        # every arc a→a' of factor f, from every node whose coordinate is a
        order = np.argsort(f.src, kind="stable")
        start = np.concatenate([[0], np.cumsum(f.out_degrees)])
        cnt = f.out_degrees[c]
        rep = np.repeat(nodes, cnt)
        off = np.arange(rep.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        arc = order[start[c[rep]] + off]
        srcs.append(rep)
        dsts.append(rep + (f.dst[arc] - f.src[arc]) * s)
        caps.append(f.arc_capacity[arc])
    rev = None
    maps = [known_reverse_isomorphism(f) for f in factors]
    if all(p is not None for p in maps):
        rev = sum(p[c] * s for p, s, c in zip(maps, strides, coords))
    name = expr or " x ".join(f"({f.expr})" if " x " in f.expr else f.expr for f in factors)
    hetero = any(f.heterogeneous for f in factors)
    return Topology(total, np.concatenate(srcs), np.concatenate(dsts), expr=name,
                    capacity=np.concatenate(caps) if hetero else None,
                    bidirectional=all(f.bidirectional for f in factors),
                    vertex_transitive=all(f.vertex_transitive for f in factors),
                    reverse_isomorphism=rev)


def cartesian_power(g: Topology, n: int) -> Topology:
    """G^n = G x ... x G (Def 14): N^n nodes, degree n·d, T_L' = n·T_L (Thm 12)."""
    if n < 2:
        raise TopofinderError(f"Cartesian power must be >= 2, got {n}")
    return cartesian_product(*([g] * n), expr=f"{_wrap(g.expr)}^{n}")


def bidirectional(g: Topology) -> Topology:
    """Bi(G) = G ∪ G^T (Appendix A.6): degree 2d, duplex-cablable. For reverse-symmetric G
    the schedule of G and its reverse run side by side, keeping T_L and τ."""
    cap = None if g.capacity is None else np.concatenate([g.capacity, g.capacity])
    return Topology(g.n, np.concatenate([g.src, g.dst]), np.concatenate([g.dst, g.src]),
                    expr=f"Bi({g.expr})", capacity=cap, bidirectional=True,
                    vertex_transitive=g.vertex_transitive)
