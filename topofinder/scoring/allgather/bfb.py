"""BFB (breadth-first-broadcast) allgather schedules: exact scorer and full generator
(paper 001 §6, Appendix E; docs/algorithms.md).

At step t node u receives the shard of every v with dist(v,u) = t from in-neighbours w with
dist(v,w) = t−1. LP (1) minimises U_{u,t}, the largest load (in shards) on u's in-links per
unit of link capacity. It is a fractional load-balancing problem, so by Hall's condition
(Thm 19; with capacities as in LP (14))

    U_{u,t} = max over sets W of u's in-neighbours of  #{v : every eligible w of v lies in W}
                                                       / capacity(W),

with a bitmask of eligible in-neighbours per shard and shard counts per mask. T_L = diameter
steps and τ = (d/N)·Σ_t max_u U_{u,t} in units of M/B (eq. (2)).

The scorer needs only U_t = max_u U_{u,t}, exactly (`_step_loads`): Hall ratios of candidate
sets W give lower bounds that are exact for laminar mask families; every other (u, t) is
certified against U_t by a proportional split or a batched max-flow whose violated min cuts
raise U_t (Dinkelbach). The generator computes every U_{u,t} by a subset-sum (zeta) transform
over all 2^k masks (k ≤ MAX_SUBSET_BITS).

The generator realises U_t = max_u U_{u,t} on every (u, t) with an integral max-flow (capacities
scaled by U_t's denominator q_t), so every split is a multiple of 1/q_t and P = lcm_t q_t chunks
per shard suffice (Appendix E.2); a fixed P is reached by rounding (Thm 20).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import lcm

import numpy as np
from scipy.sparse.csgraph import shortest_path

from topofinder.errors import TopofinderError
from topofinder.model.schedule import StepSchedule, allreduce, reduce_scatter
from topofinder.model.operations import cartesian_product
from topofinder.model.topology import Topology
from topofinder.model.reach import distances_to as reach_distances_to, in_slots
from topofinder.scoring.allgather import bfb_bits
from topofinder.model.collectives import Collective

MAX_SUBSET_BITS = 16        # generator: subset transform up to this many in-neighbours
DENSE_SLOTS = 64            # from this many in-neighbours, distances to a few nodes by bit rows
_BLOCK_CELLS = 1 << 24      # working-set size (array cells) per block of nodes


@dataclass(frozen=True)
class BFBScore:
    """Optimal BFB allgather cost. ``step_load[t-1]`` = max_u U_{u,t} (shards per unit link
    capacity); T_L in steps; τ in M/B. ``pipelined_load`` = max_u U_u^pipe (same unit, None
    when not computed): the least max load of a BFB routing run without step barriers, where
    every receiver u splits all its shards over their eligible in-links at once (Hall over the
    counts summed across steps). Each shard then still travels a broadcast tree, so
    (B/N)·pipelined_load bounds the throughput optimum T_B^FC from above (paper 002)."""

    n: int
    d: int
    T_L: int
    step_load: tuple[Fraction, ...]
    pipelined_load: Fraction | None = None

    @property
    def tau(self) -> Fraction:
        """T_B of the optimal BFB schedule in M/B (paper 001 eq. (2))."""
        return Fraction(self.d, self.n) * sum(self.step_load, Fraction(0))

    @property
    def bw_optimal(self) -> bool:
        """τ equals T_B*(N) = (N−1)/N."""
        return self.tau == Fraction(self.n - 1, self.n)


# ---- graph helpers ------------------------------------------------------------------------
def distances_to(topo: Topology, slots: np.ndarray | None = None) -> np.ndarray:
    """distT[u, v] = hops on a shortest path v→u (int32), all pairs. TopofinderError if not
    strongly connected."""
    if slots is None:
        slots = in_slots(topo.n, topo.link_matrix)[0]
    return _distance_matrix(topo, slots).astype(np.int32)


def _distance_matrix(topo: Topology, slots: np.ndarray) -> np.ndarray:
    """distT in the narrowest unsigned dtype, by a bit-parallel BFS over in-neighbours with
    bit-sliced step counters."""
    n = topo.n
    words = (n + 63) // 64
    ar = np.arange(n)
    reach = np.zeros((n, words), np.uint64)
    reach[ar, ar >> 6] = np.left_shift(np.uint64(1), (ar & 63).astype(np.uint64))
    planes: list[np.ndarray] = []          # binary counter of steps at which v had not reached u
    while True:
        new = reach.copy()
        for j in range(slots.shape[1]):
            new |= reach[slots[:, j]]
        if np.array_equal(new, reach):
            break
        carry = ~reach
        for p in range(len(planes)):
            planes[p], carry = planes[p] ^ carry, planes[p] & carry
        if carry.any():
            planes.append(carry)
        reach = new

    def unpack(bits):
        return np.unpackbits(bits.view(np.uint8), axis=1, count=n, bitorder="little")

    if not unpack(reach).all():
        raise TopofinderError(f"{topo.expr} is not strongly connected "
                              f"({topo.unreachable_text()}): BFB needs every node to reach "
                              f"every other")
    dtype = _unsigned(len(planes))
    dist = np.zeros((n, n), dtype)
    for p, plane in enumerate(planes):
        dist |= unpack(plane).astype(dtype) << dtype(p)
    return dist


def _unsigned(bits: int):
    """The narrowest unsigned numpy integer type with at least ``bits`` bits."""
    return next(t for w, t in ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64))
                if w >= bits)


def _narrow(dist: np.ndarray) -> np.ndarray:
    return dist.astype(_unsigned(max(int(dist.max()), 1).bit_length()))


def _distances_to_nodes(topo: Topology, nodes: np.ndarray, slots: np.ndarray,
                        progress=None) -> np.ndarray:
    """distT rows for the given nodes only (rows [i, v] = dist(v→node)): BFS on G^T from each,
    in batches that ``progress(done, total)`` hears of, or bit rows over the in-slot table
    ``slots`` when nodes have many in-neighbours."""
    if slots.shape[1] >= DENSE_SLOTS:          # k gathers per level beat k + 1 searches
        d = reach_distances_to(slots, nodes)
        if np.any(d < 0):
            raise TopofinderError(f"{topo.expr} is not strongly connected "
                                  f"({topo.unreachable_text()}): BFB needs every node to "
                                  f"reach every other")
        return d
    gt = topo.link_matrix.T.tocsr()
    batch = max(1, (1 << 25) // max(1, topo.n + gt.nnz))
    parts = []
    for lo in range(0, len(nodes), batch):
        parts.append(shortest_path(gt, method="D", unweighted=True, directed=True,
                                   indices=nodes[lo:lo + batch]))
        if progress is not None:
            progress(min(len(nodes), lo + batch), len(nodes))
    d = np.concatenate(parts)
    if not np.all(np.isfinite(d)):
        raise TopofinderError(f"{topo.expr} is not strongly connected "
                              f"({topo.unreachable_text()}): BFB needs every node to reach "
                              f"every other")
    return d.astype(np.int32)


# ---- Hall ratios ---------------------------------------------------------------------------
def _masks(dist_u: np.ndarray, dist_slots: np.ndarray) -> np.ndarray:
    """Eligibility bitmask per (u, v): bit j set iff dist(v, slot_j(u)) = dist(v, u) − 1.
    dist_u: (B, N); dist_slots: (B, k, N)."""
    elig = dist_slots == (dist_u[:, None, :] - 1)
    weights = (np.int64(1) << np.arange(dist_slots.shape[1], dtype=np.int64))
    return np.tensordot(weights, elig, axes=([0], [1])).astype(np.int64)


def _zeta(a: np.ndarray, k: int) -> np.ndarray:
    """Subset sums over the last axis (length 2^k): out[..., W] = Σ_{m ⊆ W} a[..., m]."""
    a = a.copy()
    lead = a.shape[:-1]
    for i in range(k):
        v = a.reshape(*lead, 1 << (k - 1 - i), 2, 1 << i)
        v[..., 1, :] += v[..., 0, :]
    return a


def _mask_counts(masks: np.ndarray, dist_u: np.ndarray, steps: int, k: int) -> np.ndarray:
    """counts[b, t-1, m] = #{v : dist(v, u_b) = t, mask(u_b, v) = m}."""
    b = masks.shape[0]
    t = dist_u.astype(np.int64)
    keep = t > 0
    idx = ((np.arange(b)[:, None] * steps + (t - 1)) << k) + masks
    return np.bincount(idx[keep], minlength=b * steps << k).reshape(b, steps, 1 << k)


def _max_ratio(num: np.ndarray, den: np.ndarray):
    """Exact argmax of num/den over the last axis (den = 0 entries ignored): (num*, den*).
    Float argmax is exact when distinct ratios differ by more than the rounding error
    (1/den_max² ≫ max·2^-52); otherwise it is checked by cross-multiplication."""
    inv = np.zeros(den.shape, np.float64)
    np.divide(1.0, den, out=inv, where=den > 0)
    j = np.argmax(num * inv, axis=-1)
    a = np.take_along_axis(num, j[..., None], -1)
    b = np.take_along_axis(den, j[..., None], -1)
    dmax = int(den.max()) if den.size else 0
    if dmax * dmax * max(int(num.max()) if num.size else 0, 1) > 10 ** 14:
        worse = (den > 0) & (num * b > a * den)
        for pos in zip(*np.nonzero(worse.any(axis=-1))):
            best = max(Fraction(int(x), int(y)) for x, y in zip(num[pos], den[pos]) if y > 0)
            a[pos], b[pos] = best.numerator, best.denominator
    b = np.where(b > 0, b, 1)
    return a[..., 0], b[..., 0]


def _hall_loads(counts: np.ndarray, caps: np.ndarray, k: int):
    """U_{u,t} = max_W count(W)/cap(W) as exact (num, den) arrays of shape (B, steps)."""
    cnt_w = _zeta(counts, k)
    single = np.zeros((caps.shape[0], 1 << k), np.int64)
    single[:, 1 << np.arange(k)] = caps
    cap_w = _zeta(single, k)
    return _max_ratio(cnt_w, np.broadcast_to(cap_w[:, None, :], cnt_w.shape))


def _step_max(num: np.ndarray, den: np.ndarray) -> list[Fraction]:
    """max over nodes (axis 0) of num/den, exact, per step."""
    a, b = _max_ratio(num.T, den.T)
    return [Fraction(int(x), int(y)) for x, y in zip(a, b)]


# ---- scorer -------------------------------------------------------------------------------
_ROW_CELLS = 1 << 17        # distance cells per block of receiving nodes (cache-sized)
_DENSE_CELLS = 1 << 21      # (node, step, mask) count cells per block on the dense path
_DENSE_MASKS = 512          # distinct masks per block on the dense path (G×G subset matrix)
_DENSE_FLOPS = 1 << 26      # (node, step) × G × G multiply-adds per block on the dense path


def bfb_score(topo: Topology, progress=None) -> BFBScore:
    """Exact optimal BFB allgather cost of ``topo`` (no LP): T_L = diameter, τ as a Fraction.
    Multi-arcs add capacity, self-loops carry nothing; a vertex-transitive topology is
    analysed at node 0 only; others with at most bfb_bits.MAX_SLOTS distinct in-neighbours are
    streamed over owner blocks (no N×N matrix; ``progress(done, total)`` hears of each block).
    """
    slots, caps = in_slots(topo.n, topo.link_matrix)
    k = slots.shape[1]
    pipelined = None
    if topo.vertex_transitive:
        dist = _narrow(_distances_to_nodes(topo, np.concatenate([[0], slots[0]]), slots,
                                           progress))
        rows, row_slots, caps = np.zeros(1, np.int64), np.arange(1, k + 1)[None, :], caps[:1]
        if k <= MAX_SUBSET_BITS:
            pipelined = _pipelined_row(dist[0], dist[1:], caps[0])
    elif k <= bfb_bits.MAX_SLOTS:
        steps, loads, pipelined, hist = bfb_bits.step_loads(topo.n, slots, caps, progress)
        hist.setflags(write=False)
        topo.__dict__.setdefault("distance_histogram", hist)       # the same BFS, kept
        return BFBScore(topo.n, topo.node_bandwidth, steps, loads, pipelined)
    else:
        dist = _distance_matrix(topo, slots)
        rows, row_slots = np.arange(topo.n), slots
    steps = int(dist[rows].max())
    return BFBScore(topo.n, topo.node_bandwidth, steps,
                    _step_loads(dist, rows, row_slots, caps, steps), pipelined)


def _pipelined_row(dist_u: np.ndarray, dist_slots: np.ndarray, caps: np.ndarray) -> Fraction:
    """U_u^pipe for one receiver u: max_W #{v ≠ u : every eligible slot of v lies in W} /
    cap(W) over slot sets W with cap(W) > 0 (Hall over every shard of u at once), exact."""
    k = caps.size
    masks = _masks(dist_u[None, :], dist_slots[None, :, :])[0][dist_u > 0]
    counts = _zeta(np.bincount(masks, minlength=1 << k)[None, :], k)[0]
    single = np.zeros((1, 1 << k), np.int64)
    single[0, 1 << np.arange(k)] = caps
    a, b = _max_ratio(counts[None, :], _zeta(single, k))
    return Fraction(int(a[0]), int(b[0]))


def bfb_tau(topo: Topology) -> Fraction:
    """τ of the optimal BFB allgather schedule in M/B (exact)."""
    return bfb_score(topo).tau


def _step_loads(dist, rows, row_slots, caps, steps) -> tuple[Fraction, ...]:
    """U_t = max_u U_{u,t} for t = 1..steps, exact, where u runs over ``dist[rows]`` with
    in-slot rows ``dist[row_slots]`` and slot capacities ``caps`` (one row per u).

    Lower bounds: the Hall ratio of W = each eligibility mask (all shards whose mask lies
    inside it, counted by a subset matrix over the masks that occur) and of W = all in-links.
    When a (u, t)'s masks form a laminar family these bounds are its exact U_{u,t} (the best
    W is a union of masks; a union of disjoint maximal masks is no denser than its densest
    part). Every other (u, t) must satisfy U_{u,t} ≤ U_t: certified by a proportional split
    (`_even_split_ok`) or by one batched max-flow (`_flow_check`); a violated min cut gives a
    denser W, U_t rises, and only the violators are checked again (Dinkelbach), so U_t ends
    at the exact maximum."""
    n = dist.shape[1]
    size = max(1, _ROW_CELLS // n)
    best_a, best_b = np.zeros(steps, np.int64), np.ones(steps, np.int64)
    pending, tables, offset = [], [], 0
    for lo in range(0, rows.size, size):
        hi = min(rows.size, lo + size)
        (t, num, den), (r, gt, gc, gi), bits = _block_bounds(
            dist, rows[lo:hi], row_slots[lo:hi], caps[lo:hi], steps)
        best_a, best_b = _max_by_step(np.concatenate([np.arange(steps), t]),
                                      np.concatenate([best_a, num]),
                                      np.concatenate([best_b, den]), steps)
        pending.append(((lo + r) * steps + gt, gc, gi + offset))
        tables.append(bits)
        offset += bits.shape[0]
    key, count, mask = (np.concatenate(x) for x in zip(*pending))
    entry, slot = np.nonzero(np.concatenate(tables))        # the masks' links, mask by mask
    start = np.searchsorted(entry, np.arange(offset))
    width = np.diff(np.append(start, entry.size))
    check = _even_split_ok
    while key.size:
        probs, prob = np.unique(key, return_inverse=True)
        group, pos = _expand(width[mask], start[mask])      # (group, link) incidences
        bad, c_w, cap_w = check(prob, count, group, slot[pos], caps[probs // steps],
                                probs % steps, best_a, best_b)
        if check is _even_split_ok:
            check = _flow_check
        elif bad.size == 0:
            break
        else:
            t_bad = probs[bad] % steps
            if np.any(c_w * best_b[t_bad] <= best_a[t_bad] * cap_w):
                raise RuntimeError("BFB scorer: a violated min cut is not denser than U_t")
            best_a, best_b = _max_by_step(np.concatenate([np.arange(steps), t_bad]),
                                          np.concatenate([best_a, c_w]),
                                          np.concatenate([best_b, cap_w]), steps)
        keep = np.isin(prob, bad)
        key, count, mask = key[keep], count[keep], mask[keep]
    return tuple(Fraction(int(a), int(b)) for a, b in zip(best_a, best_b))


def _block_bounds(dist, u, s, caps_b, steps):
    """For a block of receiving nodes: Hall-ratio lower bounds (t−1, count, capacity), the
    shard groups (row, t−1, count, mask id) of every (u, t) whose bounds may not be exact,
    and the block's mask table (G, k) bool."""
    b, k = s.shape
    du = dist[u]
    ids, bits = _mask_ids(dist, du, s)
    g = bits.shape[0]
    cap_m = caps_b @ bits.T.astype(np.int64)                       # (b, G): cap(W = mask)
    key = (np.arange(b)[:, None] * (steps + 1) + du) * g + ids
    cap_all = np.broadcast_to(caps_b.sum(axis=1)[:, None], (b, steps))      # W = all links
    if (b * (steps + 1) * g <= _DENSE_CELLS and g <= _DENSE_MASKS
            and b * steps * g * g <= _DENSE_FLOPS):
        cnt = np.bincount(key.reshape(-1), minlength=b * (steps + 1) * g)
        cnt = cnt.reshape(b, steps + 1, g)[:, 1:]
        bf = bits.astype(np.float64)
        sub = bf @ (1.0 - bf).T == 0                                # sub[i, j]: mask i ⊆ mask j
        closed = (cnt @ sub.astype(np.float64)).astype(np.int64)    # c(W = mask j), exact
        occ = cnt > 0
        crossing = (bf @ bf.T > 0) & ~sub & ~sub.T
        mixed = (occ & (occ.astype(np.float64) @ crossing.astype(np.float64) > 0)).any(axis=2)
        num = np.concatenate([closed, cnt.sum(axis=2)[:, :, None]], axis=2)
        den = np.broadcast_to(np.concatenate([cap_m, cap_all[:, :1]], axis=1)[:, None, :],
                              num.shape)
        lower = (np.arange(steps),) + _max_ratio(num.transpose(1, 0, 2).reshape(steps, -1),
                                                 den.transpose(1, 0, 2).reshape(steps, -1))
        r, t, i = np.nonzero(occ & mixed[:, :, None])
        return lower, (r, t, cnt[r, t, i], i), bits
    keys, c = np.unique(key.reshape(-1), return_counts=True)
    i, rt = keys % g, keys // g
    r, t = rt // (steps + 1), rt % (steps + 1) - 1
    keep = t >= 0
    r, t, i, c = r[keep], t[keep], i[keep], c[keep]
    total = np.bincount(r * steps + t, weights=c, minlength=b * steps).astype(np.int64)
    lower = (np.concatenate([t, np.tile(np.arange(steps), b)]), np.concatenate([c, total]),
             np.concatenate([cap_m[r, i], cap_all.reshape(-1)]))
    multi = np.isin(r * steps + t, (r * steps + t)[bits.sum(axis=1)[i] > 1])
    return lower, (r[multi], t[multi], c[multi], i[multi]), bits


def _mask_ids(dist, du, s):
    """Eligibility masks of a block, compressed: ids (b, N) into bits (G, k) bool, where
    slot j of u is eligible for v iff dist(v, slot) < dist(v, u) (= dist(v, u) − 1, since
    dist(v, u) ≤ dist(v, slot) + 1)."""
    k = s.shape[1]
    tmp = np.empty(du.shape, bool)
    words = []
    for lo in range(0, k, 64):
        width = min(64, k - lo)
        dt = _unsigned(width)
        m = np.zeros(du.shape, dt)
        for j in range(width):
            np.less(dist[s[:, lo + j]], du, out=tmp)
            m |= tmp.astype(dt) << dt(j) if j else tmp.view(np.uint8)
        words.append(m)
    if len(words) == 1 and k <= 16:
        present = np.flatnonzero(np.bincount(words[0].reshape(-1), minlength=1 << k))
        lut = np.zeros(1 << k, np.int64)
        lut[present] = np.arange(present.size)
        ids, table = lut[words[0]], present[:, None].astype(np.uint64)
    elif len(words) == 1:
        table, ids = np.unique(words[0], return_inverse=True)
        table = table[:, None].astype(np.uint64)
    else:                                           # per word, then the combined word ids
        ids = np.zeros(du.size, np.int64)
        for w in words:
            values, inv = np.unique(w.reshape(-1), return_inverse=True)
            first, ids = np.unique(ids * values.size + inv.reshape(-1), return_index=True,
                                   return_inverse=True)[1:]
        table = np.stack([w.reshape(-1)[first].astype(np.uint64) for w in words], axis=1)
    j = np.arange(k)
    bits = ((table[:, j >> 6] >> (j & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)
    return ids.reshape(du.shape), bits


def _max_by_step(t, num, den, steps):
    """Exact max of num/den (den > 0) per step t ∈ 0..steps−1, as int arrays (a, b); a float
    maximum checked by exact cross-multiplication (Fractions where that could overflow)."""
    ratio = num / den
    top = np.full(steps, -np.inf)
    np.maximum.at(top, t, ratio)
    hit = np.flatnonzero(ratio == top[t])
    first = np.zeros(steps, np.int64)
    first[t[hit[::-1]]] = hit[::-1]
    a, b = num[first].astype(np.int64), den[first].astype(np.int64)
    if int(num.max()) * int(den.max()) < 1 << 62:
        unsure = np.unique(t[num * b[t] > a[t] * den])
    else:
        unsure = np.arange(steps)
    for s in unsure:
        best = max(Fraction(int(x), int(y)) for x, y in zip(num[t == s], den[t == s]))
        a[s], b[s] = best.numerator, best.denominator
    return a, b


def _even_split_ok(prob, count, group, slot, caps, prob_t, lam_a, lam_b):
    """Which problems (u, t) keep every link within λ_t = lam_a/lam_b when each shard is split
    over its eligible links in proportion to their capacity (a feasible point of LP (1), so
    U_{u,t} ≤ λ_t)? Exact integer test per link j, scaled by the lcm M of the masks'
    capacities: q·Σ_{masks ∋ j} c·M/cap(mask) ≤ a·M. Returns the problems it cannot
    certify, in the shape of `_flow_check`'s answer."""
    k = caps.shape[1]
    cap_m = np.bincount(group, weights=caps[prob[group], slot],
                        minlength=prob.size).astype(np.int64)
    scale = int(np.lcm.reduce(np.unique(cap_m))) if cap_m.size else 1
    if (int(count.sum()) * scale * int(lam_b.max()) >= 1 << 52
            or int(lam_a.max()) * scale >= 1 << 52):
        ok = np.zeros(caps.shape[0], bool)
    else:
        load = np.bincount(prob[group] * k + slot, weights=(count * (scale // cap_m))[group],
                           minlength=caps.size).astype(np.int64).reshape(caps.shape)
        ok = np.all(load * lam_b[prob_t][:, None] <= lam_a[prob_t][:, None] * scale, axis=1)
    return np.flatnonzero(~ok), None, None


def _flow_check(prob, count, group, slot, caps, prob_t, lam_a, lam_b):
    """Is U_{u,t} ≤ λ_t = lam_a/lam_b for every problem (u, t)? One integral max-flow over all
    of them (disjoint components): group (count c, mask) supplies c·q_t, link j of u takes at
    most a_t·cap_j. Returns the problems whose flow falls short, with the shard count and
    capacity of the source side W of their min cut (a Hall set with c(W)/cap(W) > λ_t)."""
    from ortools.graph.python import max_flow

    m, k = count.size, caps.shape[1]
    supply = count * lam_b[prob_t[prob]]
    sp, sj = np.nonzero(caps > 0)
    f = max_flow.SimpleMaxFlow()
    source_arcs = f.add_arcs_with_capacity(np.zeros(m, np.int64), 2 + np.arange(m), supply)
    f.add_arcs_with_capacity(2 + group, 2 + m + prob[group] * k + slot, supply[group])
    f.add_arcs_with_capacity(2 + m + sp * k + sj, np.ones(sp.size, np.int64),
                             caps[sp, sj] * lam_a[prob_t[sp]])
    if f.solve(0, 1) != f.OPTIMAL:
        raise RuntimeError("BFB scorer: max-flow failed")
    bad = np.unique(prob[f.flows(source_arcs) < supply])
    if bad.size == 0:
        return bad, bad, bad
    side = np.asarray(f.get_source_side_min_cut(), np.int64)
    side = side[side >= 2 + m] - 2 - m
    inside = np.zeros(caps.shape, bool)
    inside[side // k, side % k] = True
    outside = np.bincount(group, weights=~inside[prob[group], slot], minlength=m)
    within = outside == 0
    c_w = np.bincount(prob[within], weights=count[within], minlength=caps.shape[0])
    cap_w = (caps * inside).sum(axis=1)
    return bad, c_w[bad].astype(np.int64), cap_w[bad]


# ---- generator ----------------------------------------------------------------------------
def bfb_schedule(topo: Topology, *, shard_chunks: int | None = None,
                 collective: str = Collective.ALLGATHER) -> StepSchedule:
    """The optimal BFB schedule of ``topo`` (LP (1) / LP (14) capacities, solved as one
    batched integral max-flow over the distinct per-(u, t) problems).

    ``shard_chunks`` None: P = lcm of the step loads' denominators (exact, τ = the scorer's).
    An integer P: splits rounded down at chunk boundaries, τ ≤ optimum + d·Σ_t max_u|N_t(u)|
    /(N·P) ≤ the bound of Thm 20. ``collective``: "allgather", "reduce-scatter" (Appendix B:
    Thm 2 when a reverse isomorphism is known, else Thm 1 on G^T) or "allreduce"."""
    if collective == Collective.REDUCE_SCATTER:
        if topo.bidirectional or topo.reverse_isomorphism is not None:
            return reduce_scatter(bfb_schedule(topo, shard_chunks=shard_chunks))
        return reduce_scatter(bfb_schedule(topo.transpose(), shard_chunks=shard_chunks),
                               topology=topo)
    if collective == Collective.ALLREDUCE:
        return allreduce(bfb_schedule(topo, shard_chunks=shard_chunks,
                                      collective=Collective.REDUCE_SCATTER),
                         bfb_schedule(topo, shard_chunks=shard_chunks))
    if collective != Collective.ALLGATHER:
        raise TopofinderError(f"collective {collective!r}: use allgather, reduce-scatter or "
                              f"allreduce")
    if shard_chunks is not None and (int(shard_chunks) != shard_chunks or shard_chunks < 1):
        raise TopofinderError(f"shard_chunks must be a positive integer, got {shard_chunks}")
    slots, caps = _generator_slots(topo)
    dist = distances_to(topo, slots)
    p, sends = _receiver_plan(dist, dist, slots, slots, caps, shard_chunks)
    return StepSchedule(topo, p, sends, method="bfb")


def bfb_orbit_plans(topo: Topology, receivers, *, shard_chunks: int | None = None,
                    inverse=None) -> tuple[int, np.ndarray]:
    """(P, sends) of an optimal BFB plan for the in-links of ``receivers`` alone (rows
    (t, v, lo, hi, u, w), w a receiver), each receiver's LP (1) solved at U_t = the largest
    U_{w,t} over the receivers — the global U_t when every node is the image of a receiver
    under an automorphism (then U_{γw,t} = U_{w,t}); O(|R|·N) memory, not N². A schedule made
    of the images of these plans has the optimal BFB τ (topofinder.model.symmetric).
    ``inverse(y)``: an automorphism (permutation of all nodes) taking y to a receiver; then
    the distances to the receivers' in-neighbours are the receivers' own, permuted, instead of
    one search each."""
    slots, caps = _generator_slots(topo)
    r = np.unique(np.asarray(receivers, np.int64))
    dist, table, slot_rows = _receiver_tables(topo, r, slots, inverse)
    p, sends = _receiver_plan(dist, table, slot_rows, slots[r], caps[r], shard_chunks)
    sends[:, 5] = r[sends[:, 5]]
    return p, sends


def bfb_receiver_rows(topo: Topology, receivers, step_loads) -> tuple[int, np.ndarray]:
    """(P, sends into ``receivers``) of :func:`bfb_schedule` of ``topo`` — the same rows —
    given its step loads U_t (``bfb_score(topo).step_load``): each receiver's LP (1) is
    solved at those U_t, as the whole schedule solves it, from one search per receiver and
    in-neighbour (O(|R|·d·N) time and memory, no N×N matrix)."""
    slots, caps = _generator_slots(topo)
    r = np.unique(np.asarray(receivers, np.int64))
    dist, table, slot_rows = _receiver_tables(topo, r, slots, None)
    steps, masks, counts, _, _ = _receiver_loads(dist, table, slot_rows, caps[r])
    k = slots.shape[1]
    q, p, pid, stretches = _flow_plan(counts, caps[r], tuple(step_loads), k, None)
    parts = [_sends_block(lo, hi, dist, masks, slots[r], pid, stretches, q, p, k, steps)
             for lo, hi in _blocks(dist.shape[0], topo.n * 8)]
    sends = _columns(parts)
    sends[:, 5] = r[sends[:, 5]]
    return p, sends


def bfb_orbit_score(topo: Topology, receivers, *, inverse=None) -> BFBScore:
    """The optimal BFB cost (T_L in steps, U_t in shards per unit capacity) of a topology in
    which every node is the image of one of ``receivers`` under an automorphism: T_L and
    U_t = max over the receivers of U_{w,t} (Hall, exact), from the receivers' distance rows
    alone — the (T_L, τ) of `bfb_orbit_plans`' schedule without its flows and sends, O(|R|·N)
    memory. ``inverse`` as in `bfb_orbit_plans`."""
    slots, caps = _generator_slots(topo)
    r = np.unique(np.asarray(receivers, np.int64))
    dist, table, slot_rows = _receiver_tables(topo, r, slots, inverse)
    steps, _, _, num, den = _receiver_loads(dist, table, slot_rows, caps[r])
    return BFBScore(topo.n, topo.node_bandwidth, steps, tuple(_step_max(num, den)))


def _receiver_tables(topo: Topology, r: np.ndarray, slots: np.ndarray, inverse):
    """(dist rows of the receivers ``r``, the distance table, slot_rows): ``table[
    slot_rows[i, j]]`` is the distance row of receiver i's in-slot j (one search per receiver
    and, without ``inverse``, per in-neighbour; with it, the receivers' rows permuted)."""
    need = np.unique(np.concatenate([r, slots[r].reshape(-1)]))
    if inverse is None:
        table = _distances_to_nodes(topo, need, slots)
    else:
        own = _distances_to_nodes(topo, r, slots)
        table = np.empty((need.size, topo.n), own.dtype)
        for i, y in enumerate(need):
            perm = inverse(int(y))
            table[i] = own[np.searchsorted(r, perm[y])][perm]
    where = np.searchsorted(need, np.concatenate([r, slots[r].reshape(-1)]))
    return table[where[:r.size]], table, where[r.size:].reshape(r.size, -1)


def bfb_receiver_sends(topo: Topology, receiver: int = 0) -> tuple[int, np.ndarray]:
    """(P, sends into ``receiver``) of the optimal BFB schedule of a vertex-transitive
    ``topo``: its U_t = U_{receiver,t} (every receiver is alike), so these are exactly the
    rows of :func:`bfb_schedule` whose receiver w is ``receiver``, from k + 1 breadth-first
    searches (O(N·d) memory: no N×N distance or mask matrix; `bfb_orbit_plans`).
    TopofinderError when ``topo`` is not vertex-transitive or has more than MAX_SUBSET_BITS
    in-neighbours."""
    if not topo.vertex_transitive:
        raise TopofinderError(f"{topo.expr} is not vertex-transitive: one receiver's BFB "
                              f"plan does not give the others'")
    return bfb_orbit_plans(topo, [int(receiver)])


def _generator_slots(topo: Topology):
    slots, caps = in_slots(topo.n, topo.link_matrix)
    if slots.shape[1] > MAX_SUBSET_BITS:
        raise TopofinderError(f"{topo.expr}: the BFB generator handles up to "
                              f"{MAX_SUBSET_BITS} distinct in-neighbours per node, not "
                              f"{slots.shape[1]}")
    return slots, caps


def _receiver_plan(dist, table, slot_rows, slots, caps, shard_chunks):
    """(P, sends into rows 0..R−1) of the BFB plans of R receivers: ``dist`` their distance
    rows (R, N), ``table[slot_rows[i, j]]`` the distance row of receiver i's in-slot j,
    ``slots``/``caps`` their in-slot nodes and capacities. U_t = max over the R receivers."""
    n, k = dist.shape[1], slots.shape[1]
    steps, masks, counts, num, den = _receiver_loads(dist, table, slot_rows, caps)
    q, p, pid, stretches = _flow_plan(counts, caps, _step_max(num, den), k, shard_chunks)
    parts = [_sends_block(lo, hi, dist, masks, slots, pid, stretches, q, p, k, steps)
             for lo, hi in _blocks(dist.shape[0], n * 8)]
    return p, _columns(parts)


def _receiver_loads(dist, table, slot_rows, caps):
    """(T_L, masks (R, N), counts (R, T_L, 2^k), num, den (R, T_L)) of R receivers (arguments
    as `_receiver_plan`): eligibility masks, shard counts per mask and the exact U_{w,t} =
    num/den by the subset transform (Hall)."""
    n, k = dist.shape[1], slot_rows.shape[1]
    rows = dist.shape[0]
    steps = int(dist.max())
    masks = np.empty((rows, n), np.int64)
    counts = np.empty((rows, steps, 1 << k), np.int64)
    num = np.empty((rows, steps), np.int64)
    den = np.empty((rows, steps), np.int64)
    for lo, hi in _blocks(rows, max(n * k, steps << k)):
        masks[lo:hi] = _masks(dist[lo:hi], table[slot_rows[lo:hi]])
        counts[lo:hi] = _mask_counts(masks[lo:hi], dist[lo:hi], steps, k)
        num[lo:hi], den[lo:hi] = _hall_loads(counts[lo:hi], caps[lo:hi], k)
    return steps, masks, counts, num, den


def _flow_plan(counts, caps, step_load, k, shard_chunks):
    """(q, P, pid, stretches): the step loads' denominators q_t, the chunks per shard P
    (lcm q_t, or ``shard_chunks``), and the integral max-flow over the distinct per-(u, t)
    problems (t, shard counts per eligibility mask, slot capacities) laid out as stretches
    for :func:`_sends_block`."""
    q = np.array([u.denominator for u in step_load], np.int64)
    a = np.array([u.numerator for u in step_load], np.int64)
    p = lcm(*q.tolist()) if shard_chunks is None else int(shard_chunks)
    pid, uniq_t, uniq_counts, uniq_caps = _distinct_problems(counts, caps)
    gp, gm, fcum = _solve_flows(uniq_t, uniq_counts, uniq_caps, k, a, q)
    g, sj = np.nonzero(np.diff(fcum, axis=1) > 0)           # nonzero stretches, sorted
    return q, p, pid, ((gp[g] << k) + gm[g], sj, fcum[g, sj], fcum[g, sj + 1])


def _columns(parts) -> np.ndarray:
    """The (S, 6) send table of blocks of send columns, in block order."""
    sends = np.empty((sum(c[0].size for c in parts), 6), np.int64, order="F")
    for col in range(6):
        np.concatenate([c[col] for c in parts], out=sends[:, col])
    return sends


def _blocks(n: int, cells_per_row: int):
    size = max(1, _BLOCK_CELLS // max(cells_per_row, 1))
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)]


def _distinct_problems(counts: np.ndarray, caps: np.ndarray):
    """Distinct per-(u, t) flow problems (t, shard counts per mask, slot capacities), found
    through a 64-bit row hash and checked exactly. Returns pid (N, steps) and the problems."""
    n, steps, width = counts.shape
    rng = np.random.default_rng(12345)
    wc = rng.integers(1, 2 ** 62, width, dtype=np.int64)
    wk = rng.integers(1, 2 ** 62, caps.shape[1], dtype=np.int64)
    wt = rng.integers(1, 2 ** 62, steps, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = counts @ wc + (caps @ wk)[:, None] + wt[None, :]
    _, first, inv = np.unique(h.reshape(-1), return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    fu, ft = first // steps, first % steps
    flat = counts.reshape(n * steps, width)
    rows = max(1, _BLOCK_CELLS // width)                 # compare block by block: no copy
    same = (all(np.array_equal(flat[first[inv[lo:lo + rows]]], flat[lo:lo + rows])
                for lo in range(0, flat.shape[0], rows))
            and np.array_equal(caps[fu][inv].reshape(n, steps, -1),
                               np.broadcast_to(caps[:, None, :], (n, steps, caps.shape[1])))
            and np.array_equal(ft[inv], np.tile(np.arange(steps), n)))
    if not same:                                         # a hash collision: exact fallback
        rows = np.concatenate([np.tile(np.arange(steps), n)[:, None], flat,
                               np.repeat(caps, steps, axis=0)], axis=1)
        uniq, inv = np.unique(rows, axis=0, return_inverse=True)
        return (inv.reshape(n, steps), uniq[:, 0], uniq[:, 1:1 + width],
                uniq[:, 1 + width:])
    return inv.reshape(n, steps), ft, flat[first], caps[fu]


def _solve_flows(t: np.ndarray, cnt: np.ndarray, cap: np.ndarray, k: int, a: np.ndarray,
                 q: np.ndarray) -> np.ndarray:
    """Integral max-flow for every distinct problem at once (disjoint components of one
    network). Shard group (mask m, c shards) supplies c·q_t; slot j takes ≤ a_t·cap_j, i.e.
    load ≤ U_t·cap_j in units of 1/q_t. Returns the groups (problem, mask) that hold shards,
    sorted, and fcum[g, 0..k]: each group's cumulative flow over the slots (only occupied
    masks: a dense problem × 2^k × k table would not fit at d = 16)."""
    from ortools.graph.python import max_flow

    gp, gm = np.nonzero(cnt)                         # groups: (problem, mask)
    supply = cnt[gp, gm] * q[t[gp]]
    n_groups = gp.size
    bit = (gm[:, None] >> np.arange(k)) & 1
    ga, gj = np.nonzero(bit)                         # group → slot arcs
    slot_node = 2 + n_groups + gp[ga] * k + gj
    sp, sj = np.nonzero(cap > 0)
    f = max_flow.SimpleMaxFlow()
    f.add_arcs_with_capacity(np.zeros(n_groups, np.int64), 2 + np.arange(n_groups), supply)
    mid = f.add_arcs_with_capacity(2 + ga, slot_node, supply[ga])
    f.add_arcs_with_capacity(2 + n_groups + sp * k + sj, np.ones(sp.size, np.int64),
                             cap[sp, sj] * a[t[sp]])
    status = f.solve(0, 1)
    if status != f.OPTIMAL or f.optimal_flow() != int(supply.sum()):
        raise RuntimeError("BFB flow does not deliver every shard: Hall bound violated")
    flow = np.zeros((n_groups, k), np.int64)
    flow[ga, gj] = f.flows(mid)
    return gp, gm, np.concatenate([np.zeros((n_groups, 1), np.int64),
                                   np.cumsum(flow, axis=1)], axis=1)


def _expand(counts: np.ndarray, starts: np.ndarray):
    """Owner row and value of the concatenated ranges starts[i] .. starts[i]+counts[i]-1."""
    owner = np.repeat(np.arange(counts.size), counts)
    value = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts - starts, counts)
    return owner, value


def _sends_block(lo, hi, dist, masks, slots, pid, stretches, q, p, k, steps):
    """Send columns (t, v, lo, hi, sender, receiver) into nodes lo..hi-1. Shards with one
    (t, mask) at u form a group, laid end to end, q_t units each, against the slots' flows laid
    end to end (the stretches): shard i takes from slot j the overlap of [i·q, (i+1)·q) with
    slot j's stretch [F_j, F_{j+1})."""
    st_key, st_j, st_lo, st_hi = stretches
    n = dist.shape[1]
    end = steps << k
    d = dist[lo:hi]
    code = np.where(d > 0, ((d - 1) << k) + masks[lo:hi], end)
    code = code.astype(np.int16 if end < 2 ** 15 else np.int32)
    order = np.argsort(code, axis=1, kind="stable").reshape(-1)
    sc = np.take_along_axis(code, order.reshape(hi - lo, n), axis=1).reshape(-1)
    brk = np.ones(sc.size, bool)
    brk[1:] = sc[1:] != sc[:-1]
    brk[::n] = True
    gs = np.flatnonzero(brk)
    gc = sc[gs].astype(np.int64)
    real = gc != end
    gs, gc = gs[real], gc[real]
    gu = lo + gs // n
    gt = (gc >> k) + 1
    key = (pid[gu, gt - 1] << k) + (gc & ((1 << k) - 1))
    first = np.searchsorted(st_key, key)
    g, s = _expand(np.searchsorted(st_key, key, side="right") - first, first)  # its stretches
    a, b = st_lo[s], st_hi[s]
    if q.max() == 1:                  # unit loads: every shard is one whole piece, no division
        e, r = _expand(b - a, a)
        ge, se = g[e], s[e]
        return [gt[ge], order[gs[ge] + r], np.zeros(r.size, np.int64),
                np.full(r.size, p, np.int64), slots[gu[ge], st_j[se]], gu[ge]]
    qs = q[gt[g] - 1]
    r0 = a // qs
    e, r = _expand(-(-b // qs) - r0, r0)                        # shards each stretch touches
    qe = qs[e]
    base = r * qe
    piece_lo = np.maximum(a[e], base) - base
    piece_hi = np.minimum(b[e], base + qe) - base
    piece_lo, piece_hi = piece_lo * p // qe, piece_hi * p // qe   # exact when q_t | P
    ok = piece_hi > piece_lo
    ge = g[e][ok]
    return [gt[ge], order[gs[ge] + r[ok]], piece_lo[ok], piece_hi[ok],
            slots[gu[ge], st_j[s[e]][ok]], gu[ge]]


def product_schedule(*factors: Topology) -> StepSchedule:
    """G_1 x ... x G_k (node (a, b) = a·N_B + b, as
    :func:`topofinder.model.operations.cartesian_product`) scheduled by its optimal BFB
    schedule (LP (1)). When every G_i is a nontrivial simple
    digraph with a BW-optimal BFB schedule, T_L = Σ D(G_i) and τ = (ΠN_i − 1)/ΠN_i (Thm 13)."""
    s = bfb_schedule(cartesian_product(*factors))
    return StepSchedule(topology=s.topology, shard_chunks=s.shard_chunks, sends=s.sends,
                        method="product")
