"""Distance-regular graphs (paper 001 Appendix F.3, Def 17, Table 8; docs/algorithms.md).

A connected graph is distance-regular when, for u, v at distance i, the numbers
c_i = |{w ~ v : d(u,w) = i−1}| and b_i = |{w ~ v : d(u,w) = i+1}| depend on i only; its
intersection array is {b_0,…,b_{D−1}; c_1,…,c_D} (Brouwer–Cohen–Neumaier, *Distance-Regular
Graphs*, 1989, "BCN"). Paper 001 shows every distance-regular graph has a BW-optimal BFB
schedule, with T_L = diameter. All graphs here are undirected and simple, built as
bidirectional Topology objects (one arc each way per edge); "line graph" below is the
undirected line graph (edges adjacent when they share an end), not the directed L(G) of
:mod:`topofinder.model.operations`.

Names accepted by :func:`distance_regular` (the expression is ``DistReg(<name>)``):

- families (parameters in decimal):
  ``Johnson-n-k`` J(n,k); ``Hamming-n-q`` H(n,q); ``Paley<q>`` P(q), q ≡ 1 mod 4 a prime
  power; ``Crown<n>`` K(n,n) minus a perfect matching; ``Odd<k>`` odd graph O_k;
  ``DoubledOdd<k>`` doubled odd graph D(O_k); ``IncPG2-<q>`` incidence graph of PG(2,q);
  ``IncAG2-<q>-par`` incidence graph of AG(2,q) minus a parallel class; ``IncGQ<q>`` incidence
  graph of the generalized quadrangle W(q); ``IncGH<q>`` incidence graph of the split Cayley
  hexagon H(q);
- single graphs: ``Heawood3`` (distance-3 graph of the Heawood graph), ``L-Petersen``,
  ``L-Heawood``, ``L-Tutte8``, ``L-Tutte12`` (line graphs of the Petersen graph, Heawood graph,
  Tutte's 8-cage and Tutte's 12-cage);
- aliases: ``Octahedron`` = Johnson-4-2, ``K55-I`` = Crown5, ``Q4`` = Hamming-4-2,
  ``Petersen`` = Odd3, ``Heawood`` = IncPG2-2, ``Tutte8`` = IncGQ2, ``Tutte12`` = IncGH2,
  ``Desargues`` = DoubledOdd3, ``Pappus`` = IncAG2-3-par.

:data:`CATALOG_NAMES` lists the catalog: the 15 d = 4 graphs of Table 8 in the table's order
(Octahedron, Paley9, K55-I, Heawood3, L-Petersen, Q4, L-Heawood, IncPG2-3, IncAG2-4-par, Odd4,
L-Tutte8, DoubledOdd4, IncGQ3, L-Tutte12, IncGH3), then family members giving entries at every
degree 3…16, with distinct (d, N) pairs so that ``DistReg(d,N)`` names one graph. Hamming
graphs enter only as Q4 (``H(n,q)`` is an expression of its own). Limits: GF(q) up to q = 256,
PG(2,q) q ≤ 32, AG(2,q) q ≤ 64, W(q) q ≤ 9, H(q) q ≤ 4, and N·d ≤ MAX_DRG_ARCS.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache, reduce
from itertools import combinations
from math import comb, isqrt
from importlib.resources import files
from pathlib import Path
from typing import Callable

import numpy as np

from topofinder.compute.output import write_text
from topofinder.errors import TopofinderError
from topofinder.families.basic import hamming
from topofinder.model.topology import Topology

MAX_DRG_ARCS = 4_000_000
CATALOG_PATH = Path(str(files("topofinder.catalog_data"))) / "distance_regular.json"


# ---- finite fields ---------------------------------------------------------------------------
def _prime_power(q: int) -> tuple[int, int]:
    """(p, k) with q = p^k, p prime; TopofinderError otherwise."""
    if q >= 2:
        p = next((f for f in range(2, isqrt(q) + 1) if q % f == 0), q)    # least prime factor
        k, r = 0, q
        while r % p == 0:
            r //= p
            k += 1
        if r == 1:
            return p, k
    raise TopofinderError(f"q = {q} is not a prime power; accepted: 2, 3, 4, 5, 7, 8, 9, 11, …")


class _Field:
    """GF(q), q = p^k ≤ 256: element a is the polynomial Σ digit_i(a) x^i over GF(p), digits
    base p; arithmetic by lookup tables ``add``, ``mul`` (q×q) and ``neg``, ``inv`` (q)."""

    def __init__(self, q: int):
        if q > 256:
            raise TopofinderError(f"GF({q}): finite fields are built for q <= 256")
        p, k = _prime_power(q)
        self.q, self.p = q, p
        weights = p ** np.arange(k)
        digits = (np.arange(q)[:, None] // weights) % p                    # (q, k)
        self.add = ((digits[:, None, :] + digits[None, :, :]) % p) @ weights
        for tail in np.ndindex(*(p,) * k):                                  # monic x^k + tail
            mul = self._mul_table(digits, np.array(tail), p, k) @ weights
            if k == 1 or np.all(mul[1:, 1:] != 0):                          # no zero divisors
                break
        self.mul = mul
        self.neg = np.argmax(self.add == 0, axis=1)
        self.inv = np.argmax(self.mul == 1, axis=1)                         # inv[0] unused

    @staticmethod
    def _mul_table(digits, tail, p, k):
        """Digits of a·b mod (x^k + tail) for all a, b: (q, q, k)."""
        prod = np.zeros(digits.shape[:1] * 2 + (2 * k - 1,), np.int64)
        for i in range(k):
            for j in range(k):
                prod[:, :, i + j] += digits[:, None, i] * digits[None, :, j]
        for top in range(2 * k - 2, k - 1, -1):                             # x^k ≡ −tail
            c = prod[:, :, top] % p
            prod[:, :, top - k:top] -= c[:, :, None] * tail
            prod[:, :, top] = 0
        return prod[:, :, :k] % p

    def dot(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Σ_i x_i y_i over the last axis (broadcasting)."""
        terms = self.mul[x, y]
        return reduce(lambda a, b: self.add[a, b], np.moveaxis(terms, -1, 0))

    def sub(self, a, b):
        return self.add[a, self.neg[b]]

    def projective_points(self, m: int) -> np.ndarray:
        """Points of PG(m−1, q): vectors in GF(q)^m whose first nonzero coordinate is 1,
        as rows of an int array, in increasing base-q order."""
        vecs = (np.arange(self.q ** m)[:, None] // self.q ** np.arange(m - 1, -1, -1)) % self.q
        lead = vecs[np.arange(len(vecs)), np.argmax(vecs != 0, axis=1)]
        return vecs[lead == 1]

    def normalise(self, vecs: np.ndarray) -> np.ndarray:
        """Scale each nonzero row so its first nonzero coordinate is 1."""
        lead = vecs[np.arange(len(vecs)), np.argmax(vecs != 0, axis=1)]
        return self.mul[self.inv[lead][:, None], vecs]


@lru_cache(maxsize=None)
def _field(q: int) -> _Field:
    return _Field(q)


def _point_index(field: _Field, points: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Map normalised vectors (rows) to their index in ``points``."""
    m = points.shape[1]
    weights = field.q ** np.arange(m - 1, -1, -1)
    table = np.full(field.q ** m, -1, np.int64)
    table[points @ weights] = np.arange(len(points))
    return lambda vecs: table[vecs @ weights]


def _lines_from_pairs(field: _Field, points: np.ndarray, i: np.ndarray,
                      j: np.ndarray) -> np.ndarray:
    """The distinct projective lines spanned by point pairs (i, j): (L, q+1) sorted point
    indices, each line once."""
    index = _point_index(field, points)
    x, y = points[i], points[j]
    cols = [index(y)]
    for t in range(field.q):                                              # x + t·y
        cols.append(index(field.normalise(field.add[x, field.mul[t, y]])))
    lines = np.sort(np.stack(cols, axis=1), axis=1)
    return np.unique(lines, axis=0)


# ---- building blocks -------------------------------------------------------------------------
def _check_size(n: int, degree: int, what: str) -> None:
    """TopofinderError unless N·d ≤ MAX_DRG_ARCS."""
    if n * degree > MAX_DRG_ARCS:
        raise TopofinderError(f"{what} has N·d = {n}·{degree} arcs; distance-regular graphs are "
                              f"built up to N·d = {MAX_DRG_ARCS}")


def _undirected(n: int, u, v, name: str, vertex_transitive: bool) -> Topology:
    """Bidirectional Topology DistReg(name) from undirected edges u–v (each listed once)."""
    u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
    return Topology(n, np.concatenate([u, v]), np.concatenate([v, u]), expr=f"DistReg({name})",
                    bidirectional=True, vertex_transitive=vertex_transitive)


def _edges(g: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Undirected edges of a simple bidirectional topology, each once (u < v)."""
    keep = g.src < g.dst
    return g.src[keep], g.dst[keep]


def _subsets(n: int, k: int) -> np.ndarray:
    """All k-subsets of {0..n−1} as sorted bitmasks."""
    return np.sort(np.array([sum(1 << i for i in c) for c in combinations(range(n), k)],
                            np.int64))


def _bits(masks: np.ndarray, n: int) -> np.ndarray:
    return (masks[:, None] >> np.arange(n)) & 1 == 1


def _need_int(value: int, low: int, what: str) -> None:
    if value < low:
        raise TopofinderError(f"{what} must be >= {low}, got {value}")


def _incidence(n_points: int, point: np.ndarray, line: np.ndarray, name: str,
               vertex_transitive: bool) -> Topology:
    """Bipartite incidence graph: points 0..P−1, then lines P..P+L−1."""
    n_lines = int(line.max()) + 1
    return _undirected(n_points + n_lines, point, n_points + line, name, vertex_transitive)


def _lines_incidence(n_points: int, lines: np.ndarray, name: str,
                     vertex_transitive: bool) -> Topology:
    """Incidence graph of a point-line geometry given as (L, q+1) point indices per line."""
    line = np.repeat(np.arange(len(lines)), lines.shape[1])
    return _incidence(n_points, lines.reshape(-1), line, name, vertex_transitive)


# ---- families --------------------------------------------------------------------------------
def johnson(n: int, k: int) -> Topology:
    """Johnson graph J(n,k) (BCN): k-subsets of an n-set, adjacent when they share k−1
    elements. N = C(n,k), degree k(n−k), diameter min(k, n−k); b_i = (k−i)(n−k−i), c_i = i²."""
    _need_int(k, 1, "J(n,k): k")
    _need_int(n, k + 1, "J(n,k): n")
    _check_size(comb(n, k), k * (n - k), f"J({n},{k})")
    masks = _subsets(n, k)
    bits = _bits(masks, n)
    us, vs = [], []
    for i in range(n):                       # swap element i (in) for element j (out)
        for j in range(n):
            rows = np.nonzero(bits[:, i] & ~bits[:, j])[0]
            other = np.searchsorted(masks, masks[rows] ^ (1 << i) ^ (1 << j))
            keep = rows < other
            us.append(rows[keep])
            vs.append(other[keep])
    return _undirected(len(masks), np.concatenate(us), np.concatenate(vs),
                       f"Johnson-{n}-{k}", True)


def hamming_drg(n: int, q: int) -> Topology:
    """Hamming graph H(n,q) = K_q^□n (BCN) from :func:`generators.hamming`: N = q^n,
    degree n(q−1), diameter n; b_i = (n−i)(q−1), c_i = i."""
    _need_int(n, 1, "H(n,q): n")
    _need_int(q, 2, "H(n,q): q")
    _check_size(q ** n, n * (q - 1), f"H({n},{q})")
    g = hamming(n, q)
    return Topology(g.n, g.src, g.dst, expr=f"DistReg(Hamming-{n}-{q})", bidirectional=True,
                    vertex_transitive=True)


def paley(q: int) -> Topology:
    """Paley graph P(q), q ≡ 1 (mod 4) a prime power: GF(q), x ~ y iff x − y is a nonzero
    square. Strongly regular (q, (q−1)/2, (q−5)/4, (q−1)/4), so distance-regular with array
    {(q−1)/2, (q−1)/4; 1, (q−1)/4}."""
    _prime_power(q)
    if q % 4 != 1:
        raise TopofinderError(f"Paley graph P({q}) needs q ≡ 1 (mod 4), got q mod 4 = {q % 4}")
    f = _field(q)
    square = np.zeros(q, bool)
    square[f.mul[np.arange(1, q), np.arange(1, q)]] = True
    x, y = np.nonzero(np.triu(square[f.sub(np.arange(q)[:, None], np.arange(q)[None, :])], 1))
    return _undirected(q, x, y, f"Paley{q}", True)


def crown(n: int) -> Topology:
    """K(n,n) minus a perfect matching (crown graph): u_i ~ w_j for i ≠ j. N = 2n, degree n−1,
    array {n−1, n−2, 1; 1, n−2, n−1} (n ≥ 3)."""
    _need_int(n, 3, "K(n,n) minus a perfect matching: n")
    _check_size(2 * n, n - 1, f"Crown{n}")
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    return _undirected(2 * n, i, n + j, f"Crown{n}", True)


def odd_graph(k: int) -> Topology:
    """Odd graph O_k (BCN): (k−1)-subsets of a (2k−1)-set, adjacent when disjoint.
    N = C(2k−1, k−1), degree k, diameter k−1."""
    _need_int(k, 2, "odd graph O_k: k")
    n = 2 * k - 1
    _check_size(comb(n, k - 1), k, f"O_{k}")
    masks = _subsets(n, k - 1)
    complement = ((1 << n) - 1) ^ masks                      # the k-set disjoint from u
    bits = _bits(complement, n)
    us, vs = [], []
    for i in range(n):                                       # drop one element of it
        rows = np.nonzero(bits[:, i])[0]
        other = np.searchsorted(masks, complement[rows] ^ (1 << i))
        keep = rows < other
        us.append(rows[keep])
        vs.append(other[keep])
    return _undirected(len(masks), np.concatenate(us), np.concatenate(vs), f"Odd{k}", True)


def doubled_odd_graph(k: int) -> Topology:
    """Doubled odd graph D(O_k) (BCN): (k−1)- and k-subsets of a (2k−1)-set, adjacent
    by inclusion. N = 2·C(2k−1, k−1), degree k, diameter 2k−1; b_i = k − ⌈i/2⌉, c_i = ⌈i/2⌉."""
    _need_int(k, 2, "doubled odd graph D(O_k): k")
    n = 2 * k - 1
    _check_size(2 * comb(n, k - 1), k, f"D(O_{k})")
    small, large = _subsets(n, k - 1), _subsets(n, k)
    bits = _bits(small, n)
    us, vs = [], []
    for i in range(n):
        rows = np.nonzero(~bits[:, i])[0]
        us.append(rows)
        vs.append(len(small) + np.searchsorted(large, small[rows] | (1 << i)))
    return _undirected(len(small) + len(large), np.concatenate(us), np.concatenate(vs),
                       f"DoubledOdd{k}", True)


def pg2_incidence(q: int) -> Topology:
    """Incidence graph of the projective plane PG(2,q), q a prime power ≤ 32: points and lines
    are the 1- and 2-subspaces of GF(q)^3 (a line is the kernel of a normalised vector l;
    x on l iff x·l = 0). N = 2(q²+q+1), degree q+1, array {q+1, q, q; 1, 1, q+1}.
    Vertex-transitive (PG(2,q) is self-dual). q = 2 gives the Heawood graph."""
    _prime_power(q)
    if q > 32:
        raise TopofinderError(f"IncPG2-{q}: projective planes are built for q <= 32")
    f = _field(q)
    pts = f.projective_points(3)
    p, l = np.nonzero(f.dot(pts[:, None, :], pts[None, :, :]) == 0)
    return _incidence(len(pts), p, l, f"IncPG2-{q}", True)


def ag2_minus_parallel_class(q: int) -> Topology:
    """Incidence graph of the affine plane AG(2,q) minus one parallel class (the vertical
    lines), q a prime power ≤ 64: points (x, y), lines y = m·x + b. N = 2q², degree q, array
    {q, q−1, q−1, 1; 1, 1, q−1, q}. Vertex-transitive: translations and shears act
    transitively on each side and (x, y) ↦ [x, −y], [m, b] ↦ (m, −b) swaps them. q = 4 is
    Table 8's N = 32 graph."""
    _prime_power(q)
    if q > 64:
        raise TopofinderError(f"IncAG2-{q}-par: affine planes are built for q <= 64")
    f = _field(q)
    x, y, m = (a.reshape(-1) for a in np.meshgrid(*(np.arange(q),) * 3, indexing="ij"))
    b = f.sub(y, f.mul[m, x])                                    # the line [m, b] through (x, y)
    return _incidence(q * q, x * q + y, m * q + b, f"IncAG2-{q}-par", True)


def gq_incidence(q: int) -> Topology:
    """Incidence graph of the generalized quadrangle W(q), q a prime power ≤ 9: points of
    PG(3,q), lines the totally isotropic lines of x0y1 − x1y0 + x2y3 − x3y2. N =
    2(q+1)(q²+1), degree q+1, array {q+1, q, q, q; 1, 1, 1, q+1}. W(q) is self-dual iff q is
    even, so the graph is vertex-transitive iff q is even. q = 2 gives Tutte's 8-cage; q = 3
    is Table 8's GQ(3,3) graph (N = 80)."""
    p, _ = _prime_power(q)
    if q > 9:
        raise TopofinderError(f"IncGQ{q}: generalized quadrangles W(q) are built for q <= 9")
    f = _field(q)
    pts = f.projective_points(4)
    i, j = np.triu_indices(len(pts), 1)
    x, y = pts[i], pts[j]
    form = f.add[_plucker(f, x, y, 0, 1), _plucker(f, x, y, 2, 3)]
    lines = _lines_from_pairs(f, pts, i[form == 0], j[form == 0])
    return _lines_incidence(len(pts), lines, f"IncGQ{q}", p == 2)


def _plucker(f: _Field, x: np.ndarray, y: np.ndarray, a: int, b: int) -> np.ndarray:
    """Grassmann coordinate p_ab = x_a y_b − x_b y_a of the line through x and y."""
    return f.sub(f.mul[x[:, a], y[:, b]], f.mul[x[:, b], y[:, a]])


# Tits' split Cayley hexagon H(q) in Q(6,q): X0X4 + X1X5 + X2X6 = X3² (H. Van Maldeghem,
# Generalized Polygons, 1998, ch. 2): its lines are the lines of Q(6,q) whose Grassmann
# coordinates satisfy p12 = p34, p54 = p32, p20 = p35, p65 = p30, p01 = p36, p46 = p31.
_HEXAGON_RELATIONS = ((1, 2, 3, 4), (5, 4, 3, 2), (2, 0, 3, 5), (6, 5, 3, 0), (0, 1, 3, 6),
                      (4, 6, 3, 1))


def gh_incidence(q: int) -> Topology:
    """Incidence graph of the split Cayley hexagon H(q), a generalized hexagon of order (q,q),
    q a prime power ≤ 4 (construction above). N = 2(q⁶−1)/(q−1), degree q+1, array
    {q+1, q, q, q, q, q; 1, 1, 1, 1, 1, q+1}. H(q) is self-dual iff q is a power of 3, so the
    graph is vertex-transitive iff p = 3. q = 2 gives Tutte's 12-cage; q = 3 is Table 8's
    GH(3,3) graph (N = 728)."""
    p, _ = _prime_power(q)
    if q > 4:
        raise TopofinderError(f"IncGH{q}: split Cayley hexagons are built for q <= 4")
    f = _field(q)
    pts = f.projective_points(7)
    quad = f.sub(reduce(lambda a, b: f.add[a, b],
                        [f.mul[pts[:, a], pts[:, a + 4]] for a in range(3)]),
                 f.mul[pts[:, 3], pts[:, 3]])
    pts = pts[quad == 0]                                              # the points of Q(6,q)
    i, j = np.triu_indices(len(pts), 1)
    x, y = pts[i], pts[j]
    # polar form of the quadric: the line xy lies on Q(6,q) iff it vanishes
    polar = reduce(lambda a, b: f.add[a, b],
                   [f.add[f.mul[x[:, a], y[:, a + 4]], f.mul[x[:, a + 4], y[:, a]]]
                    for a in range(3)])
    ok = f.sub(polar, f.mul[f.add[1, 1], f.mul[x[:, 3], y[:, 3]]]) == 0       # − 2·x3·y3
    for a, b, c, d in _HEXAGON_RELATIONS:
        ok &= _plucker(f, x, y, a, b) == _plucker(f, x, y, c, d)
    lines = _lines_from_pairs(f, pts, i[ok], j[ok])
    return _lines_incidence(len(pts), lines, f"IncGH{q}", p == 3)


# ---- graphs derived from others --------------------------------------------------------------
def undirected_line_graph(g: Topology, name: str, edge_transitive: bool = False) -> Topology:
    """Line graph of a simple, regular, undirected (bidirectional) graph g, named
    DistReg(name): one node per edge, adjacent when the edges share an end. A k-regular graph
    with E edges gives E nodes of degree 2(k−1); vertex-transitive when g is edge-transitive
    (the cages used here are)."""
    if (not g.bidirectional or g.self_loops or not g.is_regular or g.heterogeneous
            or g.link_matrix.max() > 1):
        raise TopofinderError(f"{g.expr}: the undirected line graph needs a simple regular "
                              f"undirected graph (no loops, multi-edges or one-way arcs)")
    u, v = _edges(g)
    ends = np.concatenate([u, v])
    edge = np.concatenate([np.arange(len(u))] * 2)
    incident = edge[np.argsort(ends, kind="stable")].reshape(g.n, -1)  # (N, k) edges per node
    pairs = [(incident[:, a], incident[:, b])
             for a, b in combinations(range(incident.shape[1]), 2)]
    return _undirected(len(u), np.concatenate([a for a, _ in pairs]),
                       np.concatenate([b for _, b in pairs]), name, edge_transitive)


def line_of_petersen() -> Topology:
    """Line graph of the Petersen graph O_3: N = 15, degree 4, array {4, 2, 1; 1, 1, 4}."""
    return undirected_line_graph(odd_graph(3), "L-Petersen", True)


def line_of_heawood() -> Topology:
    """Line graph of the Heawood graph (incidence graph of PG(2,2)): N = 21, degree 4, array
    {4, 2, 2; 1, 1, 2}."""
    return undirected_line_graph(pg2_incidence(2), "L-Heawood", True)


def line_of_tutte8() -> Topology:
    """Line graph of Tutte's 8-cage (incidence graph of W(2)): N = 45, degree 4, array
    {4, 2, 2, 2; 1, 1, 1, 2}."""
    return undirected_line_graph(gq_incidence(2), "L-Tutte8", True)


def line_of_tutte12() -> Topology:
    """Line graph of Tutte's 12-cage (incidence graph of H(2)): N = 189, degree 4, array
    {4, 2, 2, 2, 2, 2; 1, 1, 1, 1, 1, 2}."""
    return undirected_line_graph(gh_incidence(2), "L-Tutte12", True)


def heawood_distance3() -> Topology:
    """Distance-3 graph of the Heawood graph (Fano points ~ lines not through them): N = 14,
    degree 4, array {4, 3, 2; 1, 2, 4}."""
    heawood = pg2_incidence(2)
    u, v = np.nonzero(np.triu(heawood.distances == 3, 1))
    return _undirected(heawood.n, u, v, "Heawood3", True)


# ---- intersection arrays ---------------------------------------------------------------------
def intersection_array(topo: Topology) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """{b_0..b_{D−1}; c_1..c_D} of a distance-regular graph (Def 17; BCN), or None when
    ``topo`` is not a connected, simple, undirected, distance-regular graph.

    For every ordered pair (u, v) at distance i, with s_w = d(u,w) − d(u,v) ∈ {−1, 0, 1} over
    the k neighbours w of v: b(u,v) − c(u,v) = Σ s_w and b(u,v) + c(u,v) = Σ s_w², both from
    sparse products D·A and D²·A (D the distance matrix, A the adjacency). The graph is
    distance-regular iff b and c equal, at every pair, the values seen from vertex 0."""
    if topo.num_arcs == 0 or topo.self_loops or not topo.bidirectional or topo.heterogeneous:
        return None
    adj = topo.link_matrix
    if adj.max() > 1 or not topo.strongly_connected or not topo.is_regular:
        return None
    k = topo.degree
    dist = topo.distances                                # int32, symmetric: D[v,u] = d(u,v)
    adj = adj.astype(np.int32)
    s1 = adj @ dist                                      # [v,u]: Σ_{w ~ v} d(u,w)
    s2 = adj @ (dist * dist)                             # [v,u]: Σ_{w ~ v} d(u,w)²
    s2 -= dist * (2 * s1 - k * dist)                     # Σ (d(u,w) − d(u,v))²
    s1 -= k * dist                                       # Σ (d(u,w) − d(u,v))
    b = (s2 + s1) // 2
    c = s2 - b
    diameter = int(dist.max())
    b_ref = np.zeros(diameter + 1, np.int64)
    c_ref = np.zeros(diameter + 1, np.int64)
    b_ref[dist[0]], c_ref[dist[0]] = b[0], c[0]          # the values seen from vertex 0
    if not (np.array_equal(b, b_ref[dist]) and np.array_equal(c, c_ref[dist])):
        return None
    return tuple(int(x) for x in b_ref[:diameter]), tuple(int(x) for x in c_ref[1:])


# ---- registry --------------------------------------------------------------------------------
def _ceil_half(i: int) -> int:
    return (i + 1) // 2


def _odd_array(k: int, diameter: int):
    return (tuple(k - _ceil_half(i) for i in range(diameter)),
            tuple(_ceil_half(i) for i in range(1, diameter + 1)))


def _johnson_array(n: int, k: int):
    diameter = min(k, n - k)
    return (tuple((k - i) * (n - k - i) for i in range(diameter)),
            tuple(i * i for i in range(1, diameter + 1)))


def _polygon_array(q: int, diameter: int):
    """Incidence graph of a generalized (diameter)-gon of order (q, q)."""
    return (q + 1,) + (q,) * (diameter - 1), (1,) * (diameter - 1) + (q + 1,)


@dataclass(frozen=True)
class _Family:
    pattern: str                      # regular expression; its groups are integer arguments
    function: Callable[..., Topology]
    array: Callable[..., tuple]       # the intersection array from theory
    source: str


_BCN = "Brouwer, Cohen, Neumaier, Distance-Regular Graphs (1989)"
_FAMILIES = (
    _Family(r"Johnson-(\d+)-(\d+)", johnson, _johnson_array, f"{_BCN}: Johnson graphs"),
    _Family(r"Hamming-(\d+)-(\d+)", hamming_drg,
            lambda n, q: (tuple((n - i) * (q - 1) for i in range(n)), tuple(range(1, n + 1))),
            f"{_BCN}: Hamming graphs"),
    _Family(r"Paley(\d+)", paley,
            lambda q: (((q - 1) // 2, (q - 1) // 4), (1, (q - 1) // 4)),
            f"{_BCN}: Paley graphs (strongly regular)"),
    _Family(r"Crown(\d+)", crown, lambda n: ((n - 1, n - 2, 1), (1, n - 2, n - 1)),
            f"{_BCN}: K(n,n) minus a perfect matching"),
    _Family(r"Odd(\d+)", odd_graph, lambda k: _odd_array(k, k - 1), f"{_BCN}: odd graphs"),
    _Family(r"DoubledOdd(\d+)", doubled_odd_graph, lambda k: _odd_array(k, 2 * k - 1),
            f"{_BCN}: doubled odd graphs"),
    _Family(r"IncPG2-(\d+)", pg2_incidence, lambda q: _polygon_array(q, 3),
            f"{_BCN}: incidence graphs of projective planes"),
    _Family(r"IncAG2-(\d+)-par", ag2_minus_parallel_class,
            lambda q: ((q, q - 1, q - 1, 1), (1, 1, q - 1, q)),
            f"{_BCN}: incidence graphs of affine planes minus a parallel class"),
    _Family(r"IncGQ(\d+)", gq_incidence, lambda q: _polygon_array(q, 4),
            f"{_BCN}: incidence graphs of generalized quadrangles"),
    _Family(r"IncGH(\d+)", gh_incidence, lambda q: _polygon_array(q, 6),
            f"{_BCN}; Van Maldeghem, Generalized Polygons (1998): split Cayley hexagons"),
)
_SINGLES = {
    "Heawood3": (heawood_distance3, ((4, 3, 2), (1, 2, 4))),
    "L-Petersen": (line_of_petersen, ((4, 2, 1), (1, 1, 4))),
    "L-Heawood": (line_of_heawood, ((4, 2, 2), (1, 1, 2))),
    "L-Tutte8": (line_of_tutte8, ((4, 2, 2, 2), (1, 1, 1, 2))),
    "L-Tutte12": (line_of_tutte12, ((4, 2, 2, 2, 2, 2), (1, 1, 1, 1, 1, 2))),
}
_ALIASES = {
    "Octahedron": "Johnson-4-2", "K55-I": "Crown5", "Q4": "Hamming-4-2", "Petersen": "Odd3",
    "Heawood": "IncPG2-2", "Tutte8": "IncGQ2", "Tutte12": "IncGH2", "Desargues": "DoubledOdd3",
    "Pappus": "IncAG2-3-par",
}
_TABLE8 = ("Octahedron", "Paley9", "K55-I", "Heawood3", "L-Petersen", "Q4", "L-Heawood",
           "IncPG2-3", "IncAG2-4-par", "Odd4", "L-Tutte8", "DoubledOdd4", "IncGQ3", "L-Tutte12",
           "IncGH3")
_TABLE8_SOURCE = "paper 001 Table 8 (d = 4 examples, from distanceregular.org)"

#: The catalog: Table 8's d = 4 graphs, then other degrees 3…16 by (d, N); (d, N) distinct.
CATALOG_NAMES: list[str] = list(_TABLE8) + [
    # d = 3
    "Crown4", "Petersen", "Heawood", "Pappus", "Desargues", "Tutte8", "Tutte12",
    # d = 5
    "Crown6", "IncPG2-4", "IncAG2-5-par", "Odd5", "IncGQ4", "DoubledOdd5",
    # d = 6
    "Johnson-5-2", "Paley13", "Crown7", "IncPG2-5", "IncGQ5", "Odd6", "DoubledOdd6",
    # d = 7
    "Crown8", "IncAG2-7-par", "Odd7",
    # d = 8
    "Johnson-6-2", "Paley17", "Crown9", "IncPG2-7", "IncAG2-8-par", "IncGQ7",
    # d = 9 (Crown10 would repeat (9, 20) of Johnson-6-3)
    "Johnson-6-3", "IncPG2-8", "IncAG2-9-par", "IncGQ8",
    # d = 10
    "Johnson-7-2", "Crown11", "IncPG2-9", "IncGQ9",
    # d = 11
    "Crown12", "IncAG2-11-par",
    # d = 12
    "Paley25", "Crown13", "Johnson-8-2", "Johnson-7-3", "IncPG2-11",
    # d = 13
    "Crown14", "IncAG2-13-par",
    # d = 14
    "Paley29", "Crown15", "Johnson-9-2", "IncPG2-13",
    # d = 15
    "Crown16", "Johnson-8-3",
    # d = 16
    "Crown17", "Johnson-10-2", "Johnson-8-4", "IncAG2-16-par",
]

_ACCEPTED = ("accepted: Johnson-n-k, Hamming-n-q, Paley<q>, Crown<n>, Odd<k>, DoubledOdd<k>, "
             "IncPG2-<q>, IncAG2-<q>-par, IncGQ<q>, IncGH<q>, " + ", ".join(_SINGLES) + ", "
             + ", ".join(_ALIASES))


@dataclass(frozen=True)
class _Spec:
    function: Callable[..., Topology]
    args: tuple[int, ...]
    theory: Callable[[], tuple]       # intersection array from theory (valid parameters only)
    source: str


def _resolve(name: str) -> _Spec:
    """How to build the graph called ``name`` and where its intersection array comes from."""
    key = _ALIASES.get(name, name)
    if key in _SINGLES:
        function, array = _SINGLES[key]
        return _Spec(function, (), lambda: array, _TABLE8_SOURCE)
    for family in _FAMILIES:
        match = re.fullmatch(family.pattern, key)
        if match:
            args = tuple(int(a) for a in match.groups())
            source = _TABLE8_SOURCE if name in _TABLE8 else family.source
            return _Spec(family.function, args, lambda f=family, a=args: f.array(*a), source)
    raise TopofinderError(f"unknown distance-regular graph name {name!r}; {_ACCEPTED}")


def _order(array: tuple) -> int:
    """N = Σ k_i with k_0 = 1, k_{i+1} = k_i·b_i / c_{i+1} (BCN): the order an intersection
    array forces."""
    b, c = array
    k, total = 1, 1
    for bi, ci in zip(b, c):
        k = k * bi // ci
        total += k
    return total


@lru_cache(maxsize=256)
def distance_regular(name: str) -> Topology:
    """The distance-regular graph ``name`` (module docstring lists the names), with expression
    ``DistReg(name)``."""
    spec = _resolve(name)
    return spec.function(*spec.args).renamed(f"DistReg({name})")


def catalog_sizes() -> dict[tuple[int, int], str]:
    """(d, N) → catalog name, from the theoretical intersection arrays (no graph is built)."""
    return dict(_catalog_sizes())


@lru_cache(maxsize=1)
def _catalog_sizes() -> dict[tuple[int, int], str]:
    sizes = {}
    for name in CATALOG_NAMES:
        array = _resolve(name).theory()
        sizes[(array[0][0], _order(array))] = name
    return sizes


@lru_cache(maxsize=256)
def distance_regular_by_size(d: int, n: int) -> Topology:
    """The catalog graph of degree d with N = n nodes, expression ``DistReg(d,n)`` (paper 001
    Table 7 writes DistReg(4,32) for the N = 32 graph of Table 8)."""
    sizes = _catalog_sizes()
    if (d, n) not in sizes:
        pairs = ", ".join(f"({a},{b})" for a, b in sorted(sizes))
        raise TopofinderError(f"no catalog distance-regular graph with d = {d} and N = {n}; "
                              f"available (d,N): {pairs}")
    return distance_regular(sizes[(d, n)]).renamed(f"DistReg({d},{n})")


def catalog_entries() -> list[dict]:
    """One record per catalog graph, built and checked: its computed intersection array must
    equal the one from theory, and N, d, diameter the ones that array forces."""
    entries = []
    for name in CATALOG_NAMES:
        spec = _resolve(name)
        g = distance_regular(name)
        array, theory = intersection_array(g), spec.theory()
        if array != theory:
            raise RuntimeError(f"{name}: computed intersection array {array} differs from the "
                               f"theoretical {theory}")
        assert (g.n, g.degree, g.diameter) == (_order(theory), theory[0][0], len(theory[0]))
        entries.append({
            "name": name, "expression": g.expr, "size_expression": f"DistReg({g.degree},{g.n})",
            "N": g.n, "d": g.degree, "diameter": g.diameter,
            "intersection_array": {"b": list(array[0]), "c": list(array[1])},
            "vertex_transitive": g.vertex_transitive,
            "construction": {"function": spec.function.__name__, "args": list(spec.args)},
            "source": spec.source,
        })
    return entries


def write_catalog(path: str | Path = CATALOG_PATH) -> list[dict]:
    """Write catalog/distance_regular.json from :func:`catalog_entries`; returns the entries."""
    entries = catalog_entries()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps("Distance-regular graphs (paper 001 Appendix F.3, Table 8), generated by "
                      "topofinder.families.distance_regular.write_catalog")
    rows = ",\n  ".join(json.dumps(e) for e in entries)        # one graph per line
    write_text(path, f'{{"description": {head},\n "graphs": [\n  {rows}\n ]\n}}\n')
    return entries
