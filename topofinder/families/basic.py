"""Base and generative topology families (paper 001 Table 9, Appendix F; docs/algorithms.md).

Each function returns a Topology whose ``expr`` parses back to the same arcs.
"""

from __future__ import annotations

from math import gcd

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.operations import cartesian_power, cartesian_product, line_graph
from topofinder.model.topology import Topology


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise TopofinderError(message)


def _fmt_set(values) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def complete(m: int) -> Topology:
    """K(m): complete digraph K_m, arcs i→j for all i ≠ j; N = m, d = m−1 (bidirectional)."""
    _need(m >= 2, f"K(m) needs m >= 2 nodes, got {m}")
    i, j = np.nonzero(~np.eye(m, dtype=bool))
    return Topology(m, i, j, expr=f"K({m})", bidirectional=True, vertex_transitive=True)


def complete_bipartite(d: int, d2: int | None = None) -> Topology:
    """K(d,d): complete bipartite K_{d,d} with arcs both ways; N = 2d, degree d."""
    _need(d2 is None or d2 == d, f"K(a,b) needs a = b (a regular topology), got K({d},{d2})")
    _need(d >= 1, f"K(d,d) needs d >= 1, got {d}")
    a, b = np.meshgrid(np.arange(d), np.arange(d, 2 * d), indexing="ij")
    a, b = a.reshape(-1), b.reshape(-1)
    return Topology(2 * d, np.concatenate([a, b]), np.concatenate([b, a]), expr=f"K({d},{d})",
                    bidirectional=True, vertex_transitive=True)


def hamming(n: int, q: int) -> Topology:
    """H(n,q) = K_q^□n: q^n nodes, degree n(q−1), diameter n (distance-regular)."""
    _need(n >= 1 and q >= 2, f"H(n,q) needs n >= 1 and q >= 2, got H({n},{q})")
    if n == 1:
        return complete(q).renamed(f"H(1,{q})")
    return cartesian_power(complete(q), n).renamed(f"H({n},{q})")


def kautz(d: int, n: int) -> Topology:
    """Kautz(d,n) = L^n(K_{d+1}): N = d^n(d+1), degree d, diameter n+1."""
    _need(d >= 1 and n >= 1, f"Kautz(d,n) needs d >= 1 and n >= 1, got Kautz({d},{n})")
    return line_graph(complete(d + 1), n).renamed(f"Kautz({d},{n})")


def generalized_kautz(d: int, m: int) -> Topology:
    """Pi(d,m), the generalized Kautz graph Π_{d,m} (Def 16): arcs x → (−d·x − a) mod m for
    a = 1..d. Any N = m ≥ 2, degree d; self-loops possible; diameter ≤ Moore + 1 (Thm 21)."""
    _need(d >= 1, f"Pi(d,m) needs degree d >= 1, got {d}")
    _need(m >= 2, f"Pi(d,m) needs m >= 2 nodes, got {m}")
    x = np.repeat(np.arange(m), d)
    a = np.tile(np.arange(1, d + 1), m)
    return Topology(m, x, (-d * x - a) % m, expr=f"Pi({d},{m})")


def affine(m: int, q: int, gens) -> Topology:
    """Aff(m,q,{a,...}), an affine digraph: arcs x → (q·x + a) mod m, one per a, with the
    self-loops rewired. q must be a unit mod m (gcd(q, m) = 1), so every node also has
    in-degree |A|. Pi(d,m) is Aff(m, m−d, {m−1,...,m−d}) before rewiring; Du–Hwang's
    consecutive-d digraphs are the case A = {r, ..., r+d−1}. The nodes x with a loop
    ((q−1)·x + a ≡ 0) are joined, in increasing order, into one cycle instead (each gives up
    one loop arc and gets one out- and one in-arc), so no port is wasted on a loop; a single
    loop is kept."""
    _need(m >= 2, f"Aff(m,q,{{a,...}}) needs m >= 2 nodes, got {m}")
    gens = [int(a) % m for a in gens]
    _need(len(gens) >= 1, "Aff(m,q,{a,...}) needs at least one offset a")
    _need(len(set(gens)) == len(gens),
          f"Aff({m},{q},{{...}}): the offsets must differ mod {m}")
    _need(1 <= q < m and gcd(q, m) == 1,
          f"Aff({m},{q},{{...}}): q must be in 1..{m - 1} with gcd(q, m) = 1, got q = {q}")
    d = len(gens)
    x = np.repeat(np.arange(m, dtype=np.int64), d)
    w = (q * x + np.tile(np.asarray(gens, dtype=np.int64), m)) % m
    loops = np.flatnonzero(x == w)
    if loops.size >= 2:
        order = loops[np.argsort(x[loops], kind="stable")]
        w[order] = np.roll(x[order], -1)
    return Topology(m, x, w, expr=f"Aff({m},{q},{{{','.join(map(str, sorted(gens)))}}})")


def _circulant_generators(m: int, gens, family: str) -> list[int]:
    gens = [int(a) for a in gens]
    _need(len(gens) >= 1, f"{family} needs at least one generator")
    _need(m >= 2, f"{family} needs m >= 2 nodes, got {m}")
    for a in gens:
        _need(0 < a < m, f"{family}({m},...): generator {a} must lie in 1..{m - 1}")
    g = m
    for a in gens:
        g = gcd(g, a)
    _need(g == 1, f"{family}({m},{_fmt_set(gens)}) is disconnected: gcd of m and the "
                  f"generators is {g}; choose generators with gcd 1")
    return gens


def circulant(m: int, gens) -> Topology:
    """C(m,{a_1..a_k}): bidirectional circulant, i ~ i ± a_j (mod m); degree 2k. A generator
    a = m/2 gives a double arc i → i + m/2 (both ± copies kept)."""
    gens = _circulant_generators(m, gens, "C")
    x = np.arange(m)
    src = np.concatenate([x for _ in gens for _ in (0, 1)])
    dst = np.concatenate([(x + s * a) % m for a in gens for s in (1, -1)])
    return Topology(m, src, dst, expr=f"C({m},{_fmt_set(gens)})", bidirectional=True,
                    vertex_transitive=True)


def directed_circulant(m: int, gens) -> Topology:
    """DC(m,{a_1..a_k}): directed circulant, arcs i → i + a_j (mod m); degree k.
    Reverse-symmetric through i ↦ −i."""
    gens = _circulant_generators(m, gens, "DC")
    x = np.arange(m)
    return Topology(m, np.tile(x, len(gens)), np.concatenate([(x + a) % m for a in gens]),
                    expr=f"DC({m},{_fmt_set(gens)})", vertex_transitive=True,
                    reverse_isomorphism=(-x) % m)


def bi_ring(d: int, m: int) -> Topology:
    """BiRing(d,m): ring of m nodes, d/2 parallel links each way (d even); T_L = ⌊m/2⌋ and
    BW-optimal by BFB (App. F.1)."""
    _need(d >= 2 and d % 2 == 0, f"BiRing(d,m) needs an even degree d >= 2, got {d}")
    _need(m >= 2, f"BiRing(d,m) needs m >= 2 nodes, got {m}")
    x = np.arange(m)
    half = d // 2
    src = np.tile(x, d)
    dst = np.concatenate([(x + 1) % m] * half + [(x - 1) % m] * half)
    return Topology(m, src, dst, expr=f"BiRing({d},{m})", bidirectional=True,
                    vertex_transitive=True)


def uni_ring(d: int, m: int) -> Topology:
    """UniRing(d,m): unidirectional ring i → i+1 with d parallel links; T_L = m−1."""
    _need(d >= 1, f"UniRing(d,m) needs d >= 1, got {d}")
    _need(m >= 2, f"UniRing(d,m) needs m >= 2 nodes, got {m}")
    x = np.arange(m)
    return Topology(m, np.tile(x, d), np.tile((x + 1) % m, d), expr=f"UniRing({d},{m})",
                    vertex_transitive=True, reverse_isomorphism=(-x) % m)


def torus(*dims: int) -> Topology:
    """Torus(m_1,...,m_k): product of bidirectional rings BiRing(2, m_i); degree 2k, diameter
    Σ⌊m_i/2⌋. A size-2 dimension is a double arc between the two nodes."""
    _need(len(dims) >= 1, "Torus needs at least one dimension size")
    for m in dims:
        _need(m >= 2, f"Torus dimension sizes must be >= 2, got {m}")
    expr = f"Torus({','.join(str(m) for m in dims)})"
    if len(dims) == 1:
        return bi_ring(2, dims[0]).renamed(expr)
    return cartesian_product(*[bi_ring(2, m) for m in dims], expr=expr)


def hypercube(n: int) -> Topology:
    """Hypercube(n) = K_2^□n: 2^n nodes, degree n, diameter n."""
    _need(n >= 1, f"Hypercube(n) needs n >= 1, got {n}")
    if n == 1:
        return complete(2).renamed("Hypercube(1)")
    return cartesian_power(complete(2), n).renamed(f"Hypercube({n})")


def de_bruijn(d: int, n: int) -> Topology:
    """DBJ(d,n): de Bruijn digraph on d^n strings, x → (d·x + a) mod d^n, a = 0..d−1;
    degree d, diameter n, self-loops at the constant strings. Reverse-symmetric through
    string reversal."""
    _need(d >= 2 and n >= 1, f"DBJ(d,n) needs d >= 2 and n >= 1, got DBJ({d},{n})")
    m = d ** n
    _need(m <= 1_000_000, f"DBJ({d},{n}) has {m} nodes; topofinder handles N <= 1000000")
    x = np.repeat(np.arange(m), d)
    a = np.tile(np.arange(d), m)
    digits = (np.arange(m)[:, None] // d ** np.arange(n)[None, :]) % d
    reverse = (digits[:, ::-1] * d ** np.arange(n)[None, :]).sum(axis=1)
    return Topology(m, x, (d * x + a) % m, expr=f"DBJ({d},{n})", reverse_isomorphism=reverse)
