"""Schedules for the expansions of paper 001 §5, Appendix A.6 and D.

Each construction takes a base allgather :class:`StepSchedule` and returns the expanded
allgather schedule on the expanded topology of :mod:`topofinder.model.operations` (same node
numbering), built with numpy over the base's sends. Chunk ranges stay integral: where a
construction splits a chunk, the shard is cut into more chunks (``shard_chunks`` grows by the
needed factor). The replayed T_L (steps) and τ (M/B) equal the ``predict_*`` functions of
:mod:`topofinder.expansions.predict` (docs/algorithms.md), or stay below them where those are
bounds.
"""

from __future__ import annotations

from math import lcm

import numpy as np

from topofinder.model import operations
from topofinder.errors import TopofinderError
from topofinder.model.schedule import StepSchedule, send_rows
from topofinder.model.topology import Topology
from topofinder.model.collectives import Collective


# ---- helpers ---------------------------------------------------------------------------------
def _rows(a: StepSchedule) -> np.ndarray:
    """The base sends as an (S, 6) int64 array, columns (t, v, lo, hi, u, w)."""
    if a.sends.shape[0] == 0:
        raise TopofinderError(f"{a.topology.expr}: the base schedule has no sends")
    return np.asarray(a.sends, dtype=np.int64).reshape(-1, 6)


def _allgather(a: StepSchedule, what: str) -> None:
    if a.collective != Collective.ALLGATHER:
        raise TopofinderError(f"{what} expands allgather schedules, got a {a.collective} "
                              f"schedule (expand the allgather, then reverse it)")


def group_indices(keys: np.ndarray, size: int):
    """CSR grouping of indices 0..len(keys)-1 by key: (order, start, count)."""
    order = np.argsort(keys, kind="stable")
    count = np.bincount(keys, minlength=size)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    return order, start, count


def group_members(keys: np.ndarray, groups):
    """For every row i and every member m of group keys[i], row-major: (row index, member,
    the member's rank in its group)."""
    order, start, count = groups
    cnt = count[keys]
    rep = np.repeat(np.arange(keys.size), cnt)
    off = np.arange(rep.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return rep, order[start[keys[rep]] + off], off


def _schedule(topo: Topology, chunks: int, parts: list[np.ndarray], method: str) -> StepSchedule:
    sends = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return StepSchedule(topology=topo, shard_chunks=int(chunks), sends=sends, method=method)


# ---- line graph (Def 1, Thm 7, 10) -------------------------------------------------------------
def line_graph_schedule(a: StepSchedule, times: int = 1) -> StepSchedule:
    """Def 1 of paper 001 applied ``times`` times: the allgather schedule of L^times(G).

    Step 1: every node v'v of L(G) sends its whole shard to each out-neighbour vu. Step t+1:
    for every base send (v's chunk C, u→w, step t), node uw sends chunk C of every v'v to every
    ww' ≠ v'v. A base send over a k-fold multi-arc u→w is split evenly over the k line-graph
    nodes uw_1..uw_k. T_L' = T_L + 1; τ' ≤ τ + 1/N, with equality for a BFB base whose
    out-neighbourhoods all exceed one node (Thm 7, 10)."""
    if times < 1:
        raise TopofinderError(f"line-graph power must be >= 1, got {times}")
    for _ in range(times):
        a = _line_graph_once(a)
    return a


def _line_graph_once(a: StepSchedule) -> StepSchedule:
    _allgather(a, "line-graph expansion")
    g = a.topology
    lg = operations.line_graph(g)
    rows = _rows(a)
    n = g.n
    # split sends over parallel arcs u→w: refine chunks by the lcm of the multiplicities used
    pair = g.src * n + g.dst
    uniq, pair_id, mult = np.unique(pair, return_inverse=True, return_counts=True)
    by_pair = group_indices(pair_id, uniq.size)
    send_pair = np.searchsorted(uniq, rows[:, 4] * n + rows[:, 5])
    if not np.array_equal(uniq[np.minimum(send_pair, uniq.size - 1)], rows[:, 4] * n + rows[:, 5]):
        raise TopofinderError(f"{g.expr}: the base schedule sends over a pair that is no arc")
    k = mult[send_pair]
    refine = lcm(*np.unique(k).tolist())
    rep, sender, _ = group_members(send_pair, by_pair)            # one row per parallel arc u→w
    base = rows[rep]
    piece = (base[:, 3] - base[:, 2]) * refine // k[rep]
    slot = np.arange(rep.size) - np.repeat(np.cumsum(k) - k, k)
    lo = base[:, 2] * refine + slot * piece
    chunks = a.shard_chunks * refine
    # every in-arc v'v of the shard owner v, every out-arc ww' of the receiver w
    in_arcs = group_indices(g.dst, n)
    out_arcs = group_indices(g.src, n)
    r1, owner, _ = group_members(base[:, 1], in_arcs)
    r2, receiver, _ = group_members(base[r1, 5], out_arcs)
    r = r1[r2]
    owner = owner[r2]
    keep = owner != receiver
    r, owner, receiver = r[keep], owner[keep], receiver[keep]
    step = (base[r, 0] + 1, owner, lo[r], lo[r] + piece[r], sender[r], receiver)
    first = lg.src != lg.dst
    e, f = lg.src[first], lg.dst[first]
    return StepSchedule(topology=lg, shard_chunks=int(chunks),
                        sends=send_rows((1, e, 0, chunks, e, f), step), method="line-graph")


# ---- degree expansion (Def 2, Thm 11) ----------------------------------------------------------
def degree_schedule(a: StepSchedule, factor: int) -> StepSchedule:
    """Def 2 of paper 001: the allgather schedule of G*n (n = ``factor``).

    Steps 1..T: every base send (v's C, u→w, t) becomes (v_j's C, u_j→w_i, t) for all copies
    i, j. Step T+1: u_j receives chunk α of u_i's shard (i ≠ j) from its α-th in-arc, the shard
    cut into n·d equal chunks. T_L' = T_L + 1, τ' = τ + (n−1)/(nN) (Thm 11)."""
    _allgather(a, "degree expansion")
    g = a.topology
    if factor < 2:
        raise TopofinderError(f"degree expansion factor must be >= 2, got {factor}")
    if g.self_loops:
        raise TopofinderError(f"{g.expr} has self-loops; degree expansion (Def 13) needs a "
                              f"topology without self-loops")
    if not g.is_regular or g.heterogeneous:
        raise TopofinderError(f"{g.expr}: degree expansion (Thm 11) needs a d-regular "
                              f"topology with homogeneous links")
    ge = operations.degree_expansion(g, factor)
    n, d, nf = g.n, g.degree, factor
    rows = _rows(a)
    chunks = lcm(a.shard_chunks, nf * d)
    scale = chunks // a.shard_chunks
    i, j = np.meshgrid(np.arange(nf), np.arange(nf), indexing="ij")
    i, j = i.reshape(1, -1), j.reshape(1, -1)
    col = lambda c: rows[:, c:c + 1]                                  # noqa: E731
    body = np.stack(np.broadcast_arrays(col(0), j * n + col(1), col(2) * scale,
                                        col(3) * scale, j * n + col(4), i * n + col(5)),
                    axis=2).reshape(-1, 6)
    # last step: arc x→u (rank r among u's in-arcs), copy k of x, receiver u_j, shard of u_i
    order, start, _ = group_indices(g.dst, n)
    rank = np.empty(g.num_arcs, np.int64)
    rank[order] = np.arange(g.num_arcs) - start[g.dst[order]]
    piece = chunks // (nf * d)
    kk, ii, jj = np.meshgrid(np.arange(nf), np.arange(nf), np.arange(nf), indexing="ij")
    other = ii != jj
    kk, ii, jj = kk[other][None, :], ii[other][None, :], jj[other][None, :]
    x, u, r = g.src[:, None], g.dst[:, None], rank[:, None]
    alpha = kk * d + r
    last = np.stack(np.broadcast_arrays(a.num_steps + 1 + 0 * x, ii * n + u, alpha * piece,
                                        (alpha + 1) * piece, kk * n + x, jj * n + u),
                    axis=2).reshape(-1, 6)
    return _schedule(ge, chunks, [body, last], "degree")


# ---- Cartesian power (Def 14, Thm 12) ----------------------------------------------------------
def power_schedule(a: StepSchedule, power: int, sources=None) -> StepSchedule:
    """Def 14 of paper 001: the allgather schedule of G^n (n = ``power``).

    A^(1) runs the base schedule along dimension 1, then 2, ..., n (phase j shifted by
    (j−1)·T steps, replicated over the coordinates before and after j); A^(i) is A^(1) with
    coordinates rotated by i−1 and carries the i-th of n equal sub-shards.
    T_L' = n·T_L, τ' = τ·N/(N−1)·(N^n−1)/N^n (Thm 12).

    ``sources`` (base nodes): only the sends of the shards of G^n's nodes whose coordinates
    all lie in ``sources``, given ``a``'s sends of those shards alone (the representatives of
    an orbit schedule: every phase replays the base rows of one coordinate's shard, the other
    source coordinates only label them; topofinder.model.symmetric)."""
    _allgather(a, "Cartesian power")
    g = a.topology
    if power < 2:
        raise TopofinderError(f"Cartesian power must be >= 2, got {power}")
    gp = operations.cartesian_power(g, power)
    n, p, steps = g.n, power, a.num_steps
    rows = _rows(a)
    own = np.arange(n) if sources is None else np.unique(np.asarray(sources, np.int64))
    first = np.concatenate([_power_phase(rows, j, n, p, own, steps) for j in range(p)])
    out = np.empty((p * first.shape[0], 6), np.int64)
    for i in range(p):                       # rotate coordinates right by i, sub-shard i
        blk = out[i * first.shape[0]:(i + 1) * first.shape[0]]
        blk[:, 0] = first[:, 0]
        for c in (1, 4, 5):
            blk[:, c] = (first[:, c] % n ** i) * n ** (p - i) + first[:, c] // n ** i
        blk[:, 2:4] = first[:, 2:4] + i * a.shard_chunks
    return _schedule(gp, p * a.shard_chunks, [out], "cartesian-power")


def _tuples(own: np.ndarray, length: int, n: int) -> np.ndarray:
    """Node ids of G^length (mixed radix n, last coordinate fastest) whose coordinates all lie
    in ``own``."""
    ids = np.zeros(1, np.int64)
    for _ in range(length):
        ids = (ids[:, None] * n + own[None, :]).reshape(-1)
    return ids


def _power_phase(rows: np.ndarray, j: int, n: int, p: int, own: np.ndarray,
                 steps: int) -> np.ndarray:
    """Phase j (0-based dimension) of A^(1): base rows along coordinate j, shifted by j·T
    steps, for source prefix x ∈ own^j, every holder prefix y and suffix z ∈ own^(p−j−1)
    (shared by the source and the holders)."""
    after = n ** (p - j - 1)
    block = n * after                        # stride of the "before" coordinates
    xs, ys, zs = (c.reshape(1, -1) for c in np.meshgrid(
        _tuples(own, j, n), np.arange(n ** j), _tuples(own, p - j - 1, n), indexing="ij"))
    view = np.empty((rows.shape[0], xs.size, 6), np.int64)
    col = lambda c: rows[:, c:c + 1]                                   # noqa: E731
    view[:, :, 0] = col(0) + j * steps
    view[:, :, 1] = xs * block + col(1) * after + zs
    view[:, :, 2] = col(2)
    view[:, :, 3] = col(3)
    view[:, :, 4] = ys * block + col(4) * after + zs
    view[:, :, 5] = ys * block + col(5) * after + zs
    return view.reshape(-1, 6)


# ---- uni → bidirectional (Appendix A.6) --------------------------------------------------------
def bidirectional_schedule(a: StepSchedule) -> StepSchedule:
    """Appendix A.6 of paper 001: the allgather schedule of Bi(G) = G ∪ G^T for reverse-
    symmetric G. Half of every shard follows A on G, the other half follows g(A) on G^T, where g
    is the reverse isomorphism (arc u→w of G ↦ arc g(u)→g(w) of G^T). T_L' = T_L, τ' = τ when G
    has no 2-cycles (A and g(A) then use disjoint links); τ' ≤ τ otherwise."""
    _allgather(a, "Bi(G)")
    g = a.topology
    p = operations.known_reverse_isomorphism(g)
    if p is None:
        raise TopofinderError(f"{g.expr}: Bi(G) needs a reverse-symmetric G with a known "
                              f"reverse isomorphism (Topology.reverse_isomorphism)")
    bi = operations.bidirectional(g)
    rows = _rows(a)
    half = a.shard_chunks
    mirrored = np.stack([rows[:, 0], p[rows[:, 1]], rows[:, 2] + half, rows[:, 3] + half,
                         p[rows[:, 4]], p[rows[:, 5]]], 1)
    return _schedule(bi, 2 * half, [rows, mirrored], "bidirectional")
