"""The BFB step loads U_t = max_u U_{u,t} of a large topology without an N×N distance matrix
(paper 001 §6, Appendix E; docs/algorithms.md, "Distances at scale").

Hall's condition (Thm 19, capacities as in LP (14)) gives, for receiver u at step t,

    U_{u,t} = max_{W ⊆ in-slots(u), cap(W) > 0} #{v at distance t: every eligible slot ∈ W} / cap(W).

With A_j(u) = owners v that reach in-slot j of u within t − 1 hops but u only in t (exactly
the shards for which slot j is eligible at step t; topofinder.model.reach), the shards whose
eligible slots lie in W are L ∖ ⋃_{j∉W} A_j with L = ⋃_j A_j, so

    count(W) = |⋃_j A_j| − |⋃_{j ∉ W} A_j|.

Union sizes of all 2^k slot sets are popcounts of bit rows, summed over owner blocks, so the
memory is O(N·2^k·T_L) counters plus one block of reach rows, and U_t is exact (integer
counts, maxima checked by cross-multiplication). Practical for k ≤ MAX_SLOTS distinct
in-neighbours; topofinder.scoring.allgather.bfb uses it for topologies without a single-node
shortcut.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.reach import levels, owner_blocks, popcount_rows

#: Most distinct in-neighbours per node handled here (2^k unions per row and step).
MAX_SLOTS = 6


def step_loads(n: int, slots: np.ndarray, caps: np.ndarray,
               progress=None) -> tuple[int, tuple[Fraction, ...], Fraction, np.ndarray]:
    """(T_L, (U_1, …, U_{T_L}), U_pipe, hist) exactly, streaming over owner blocks; ``slots`` and
    ``caps`` as topofinder.model.reach.in_slots gives them. U_pipe = max_u U_u^pipe, the Hall
    ratio of all of u's shards at once (counts summed over t): the least max load per unit
    capacity of a BFB routing whose steps overlap (see topofinder.scoring.allgather.bfb);
    hist[t] = ordered pairs at distance t (Σ_u |⋃_j A_j(u)|, as Topology.distance_histogram). TopofinderError
    if some owner never reaches some node. ``progress(done, total)`` hears of every block."""
    k = slots.shape[1]
    if k > MAX_SLOTS:
        raise TopofinderError(f"streamed BFB scoring handles up to {MAX_SLOTS} distinct "
                              f"in-neighbours per node, got {k}")
    dtype = np.int32 if n < 2**31 else np.int64
    unions: list[np.ndarray] = []              # unions[t-1][u, S] = |⋃_{j∈S} A_j(u)|
    for lo, hi in owner_blocks(n):
        for t, prev, gathered, _ in levels(slots, lo, hi):
            if t > len(unions):
                unions.append(np.zeros((n, 1 << k), dtype))
            fresh = [np.bitwise_and(g, ~prev) for g in gathered]
            _add_union_counts(unions[t - 1], fresh)
        if progress is not None:
            progress(hi, n)
    hist = np.array([n] + [int(u[:, -1].sum(dtype=np.int64)) for u in unions], np.int64)
    if int(hist.sum()) != n * n:
        raise TopofinderError("BFB needs every node to reach every other: the topology is "
                              "not strongly connected")
    cap_w = _subset_sums(caps)
    loads = tuple(_max_hall_ratio(u, cap_w) for u in unions)
    return len(unions), loads, _max_hall_ratio(sum(unions[1:], unions[0]), cap_w), hist


def _add_union_counts(out: np.ndarray, fresh: list[np.ndarray]) -> None:
    """out[:, S] += popcount of ⋃_{j∈S} fresh[j] per row, for every nonempty S (depth-first
    over S with each set built from its prefix by one OR)."""
    k = len(fresh)
    stack: list[tuple[int, int, np.ndarray]] = [(1 << j, j, fresh[j]) for j in range(k)]
    while stack:
        s, top, bits = stack.pop()
        out[:, s] += popcount_rows(bits).astype(out.dtype, copy=False)
        for j in range(top + 1, k):
            stack.append((s | 1 << j, j, np.bitwise_or(bits, fresh[j])))


def _subset_sums(caps: np.ndarray) -> np.ndarray:
    """cap_w[u, W] = Σ_{j∈W} caps[u, j] for every W ⊆ slots (bitmask index)."""
    n, k = caps.shape
    w = np.arange(1 << k)
    member = (w[:, None] >> np.arange(k)) & 1                     # (2^k, k)
    return caps @ member.T


def _max_hall_ratio(unions: np.ndarray, cap_w: np.ndarray) -> Fraction:
    """max over rows u and sets W with cap(W) > 0 of count(W)/cap(W), count(W) =
    |⋃ all| − |⋃_{j∉W}| (column 0, the empty union, is 0), exactly (float argmax confirmed by integer cross-multiplication)."""
    full = unions.shape[1] - 1
    w = np.arange(full + 1)
    count = unions[:, full:full + 1].astype(np.int64) - unions[:, full ^ w].astype(np.int64)
    ok = cap_w > 0
    ratio = np.where(ok, count / np.where(ok, cap_w, 1), -1.0)
    i = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    a, b = int(count[i]), int(cap_w[i])
    better = ok & (count * b > a * cap_w)
    if better.any():                               # float ties broken wrongly: exact pass
        best = max(Fraction(int(c), int(d)) for c, d in zip(count[better], cap_w[better]))
        return max(best, Fraction(a, b))
    return Fraction(a, b)
