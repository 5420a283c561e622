"""Periodic broadcast schedules from weighted trees (paper 003 §5.4).

Given trees with rates λ_l (Σ λ_l = TP; :func:`structures.weighted_trees`), the period P
makes every λ_l·P an integer; link e then carries m_e = Σ_{l ∋ e} λ_l·P messages per period,
busy for m_e·c_e. Under ``one`` the busy times form a bipartite (sender × receiver) weight
matrix whose row and column sums are ≤ P; 003 Thm 6 (weighted bipartite edge colouring)
splits it into matchings with durations μ_i, Σ μ_i = max port load ≤ P. Here: pad the matrix
to equal row and column sums Δ (north-west-corner fill of the deficits), then peel perfect
matchings of its support (Birkhoff–von Neumann; each exists by König's theorem), each by the
smallest entry it uses, giving real sends only their real part. Under ``multi`` and ``node``
every link sends throughout one slot. Finally the period is scaled so every slot moves a whole
number of messages on each link, and a node at depth h of tree l forwards, in period r, the
messages of batch r − h (lag h), which it received in an earlier period.
"""

from __future__ import annotations

from fractions import Fraction
from math import lcm

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching

from topofinder.model.oneroot_schedule import PeriodicSchedule
from topofinder.scoring.oneroot.platform import Platform


def _pad(busy: dict, n: int) -> tuple[dict, Fraction]:
    """Dummy entries bringing every row and column sum of ``busy`` to Δ (the largest one)."""
    rows, cols = [Fraction(0)] * n, [Fraction(0)] * n
    for (j, k), t in busy.items():
        rows[j] += t
        cols[k] += t
    delta = max(rows + cols)
    dr = [delta - r for r in rows]
    dc = [delta - c for c in cols]
    dummy, j, k = {}, 0, 0
    while j < n and k < n:
        t = min(dr[j], dc[k])
        if t:
            dummy[(j, k)] = t
        dr[j] -= t
        dc[k] -= t
        if dr[j] == 0:
            j += 1
        if dc[k] == 0:
            k += 1
    return dummy, delta


def matchings(busy: dict, n: int) -> list[tuple[Fraction, dict]]:
    """003 Thm 6: [(μ_i, {(j, k): busy time in this matching})] with Σ μ_i = max port load,
    every (j, k)'s times summing to busy[(j, k)], each dict a matching."""
    real = {key: t for key, t in busy.items() if t}
    dummy, _ = _pad(real, n)
    out = []
    while real:
        keys = sorted(set(real) | set(dummy))
        m = sp.csr_matrix((np.ones(len(keys)), ([j for j, _ in keys], [k for _, k in keys])),
                          shape=(n, n))
        match = maximum_bipartite_matching(m, perm_type="column")
        pairs = [(j, int(match[j])) for j in range(n) if match[j] >= 0]
        mu = min(real.get(p, 0) + dummy.get(p, 0) for p in pairs)
        slot = {}
        for p in pairs:
            take = min(mu, real.get(p, Fraction(0)))
            if take:
                slot[p] = take
                real[p] -= take
                if not real[p]:
                    del real[p]
            rest = mu - take
            if rest:
                dummy[p] -= rest
                if not dummy[p]:
                    del dummy[p]
        out.append((mu, slot))
    return out


def _depth(pl: Platform, parent: list[int]) -> list[int]:
    depth = [-1] * pl.n
    depth[pl.root] = 0

    def walk(v):
        if depth[v] < 0:
            depth[v] = walk(int(pl.src[parent[v]])) + 1
        return depth[v]

    for v in range(pl.n):
        walk(v)
    return depth


def periodic_schedule(pl: Platform, trees: list[tuple[Fraction, list[int]]]) -> PeriodicSchedule:
    """The periodic schedule of ``trees`` on ``pl`` (module doc), at throughput Σ λ_l."""
    period = Fraction(lcm(*(lam.denominator for lam, _ in trees)))
    weights = [lam * period for lam, _ in trees]
    load: dict = {}
    for w, (_, parent) in zip(weights, trees):
        for v, e in enumerate(parent):
            if e >= 0:
                load[e] = load.get(e, 0) + w
    if pl.port_model == "one":
        busy = {(int(pl.src[e]), int(pl.dst[e])): m * pl.cost(e) for e, m in load.items()}
        index = {(int(pl.src[e]), int(pl.dst[e])): e for e in load}
        slots = [(mu, {index[p]: t for p, t in slot.items()})
                 for mu, slot in matchings(busy, pl.n)]
        idle = period - sum(mu for mu, _ in slots)
        if idle:
            slots.append((idle, {}))
    else:
        slots = [(period, {e: m * pl.cost(e) for e, m in load.items()})]
    scale = lcm(*(Fraction(t * int(pl.cap[e])).denominator
                  for _, s in slots for e, t in s.items()))
    return _assemble(pl, trees, [int(w * scale) for w in weights], period * scale,
                     [(mu * scale, {e: int(t * scale * int(pl.cap[e])) for e, t in s.items()})
                      for mu, s in slots])


def _assemble(pl: Platform, trees, weights, period, slots) -> PeriodicSchedule:
    """Hand each link's messages (tree by tree, index by index) to its slots in order."""
    depths = [_depth(pl, parent) for _, parent in trees]
    queue: dict = {}
    for l, (w, (_, parent)) in enumerate(zip(weights, trees)):
        for v, e in enumerate(parent):
            if e >= 0:
                queue.setdefault(e, []).append([l, 0, w])
    rows_per_slot = []
    for _, sends in slots:
        rows = []
        for e, count in sends.items():
            u, w = int(pl.src[e]), int(pl.dst[e])
            while count:
                l, lo, hi = queue[e][0]
                take = min(count, hi - lo)
                rows.append((u, w, l, lo, lo + take, depths[l][u]))
                count -= take
                queue[e][0][1] += take
                if queue[e][0][1] == hi:
                    queue[e].pop(0)
        rows_per_slot.append(tuple(rows))
    parents = [tuple(-1 if e < 0 else int(pl.src[e]) for e in parent) for _, parent in trees]
    return PeriodicSchedule(
        pl.n, pl.root, pl.port_model, pl.bandwidth,
        tuple((int(u), int(w), int(c)) for u, w, c in zip(pl.src, pl.dst, pl.cap)),
        Fraction(period), tuple(zip(weights, parents)),
        tuple((mu, rows) for (mu, _), rows in zip(slots, rows_per_slot)))
