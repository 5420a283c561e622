"""Minimum-diameter circulants (paper 001 App. F.4, Thm 22; Boesch & Wang 1985 [18]).

Thm 22: for n > 6 and m = ⌈(−1 + √(2n−1))/2⌉, C(n,{m,m+1}) has diameter m, the minimum over
all 2-generator circulants C(n,{a1,a2}). App. F.4 extends it to any even degree d ≥ 4 with
multi-arcs: the d/2 generator pairs are m and m+1 repeated. Distances of a circulant are the
same from every node (vertex-transitive), so one BFS from node 0 gives them all.
"""

from __future__ import annotations

from itertools import combinations_with_replacement
from math import comb, gcd

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from topofinder.errors import TopofinderError
from topofinder.generators.basic import circulant
from topofinder.topology import Topology

#: best_circulant searches exhaustively while (#generator multisets) · n stays below this.
EXHAUSTIVE_BUDGET = 2_000_000


def theorem22_step(n: int) -> int:
    """m = ⌈(−1 + √(2n−1))/2⌉ of Thm 22, exactly: the least m with (2m+1)² ≥ 2n−1, i.e. the
    least m whose 2-generator Moore bound 2m² + 2m + 1 reaches n nodes."""
    if n < 2:
        raise TopofinderError(f"a circulant needs n >= 2 nodes, got {n}")
    m = 0
    while (2 * m + 1) ** 2 < 2 * n - 1:
        m += 1
    return m


def optimal_circulant(n: int, d: int = 4) -> Topology:
    """Thm 22's C(n,{m,m+1}) (d = 4, diameter m, n > 6) and its App. F.4 multi-arc version for
    even d > 4: d/2 generator pairs, ⌈d/4⌉ copies of m and ⌊d/4⌋ copies of m+1 (same diameter
    m; with d ≡ 2 mod 4 the two generators carry unequal multiplicity)."""
    if d < 4 or d % 2:
        raise TopofinderError(f"the Thm 22 circulant needs an even degree d >= 4, got d = {d}")
    if n <= 6:
        raise TopofinderError(f"Thm 22 holds for n > 6 nodes, got n = {n}; "
                              f"use best_circulant for small n")
    return circulant(n, _theorem22_generators(n, d))


def circulant_distances(n: int, gens) -> np.ndarray:
    """Hops from node 0 to every node of C(n, gens) (−1 if unreachable); one vectorised BFS."""
    return circulant_distances_batch(n, np.asarray([list(gens)], dtype=np.int64))[0]


def circulant_distances_batch(n: int, gens: np.ndarray) -> np.ndarray:
    """Row r: hops from node 0 in C(n, gens[r]) (−1 if unreachable). ``gens``: (R, k) ints.
    All R circulants advance one BFS level per numpy step; finished rows drop out."""
    gens = np.asarray(gens, dtype=np.int64) % n
    # a move by +s reads the frontier rotated by s: window n − s of the doubled row
    starts = np.concatenate([n - gens, gens], axis=1) % n        # (R, 2k)
    dist = np.full((gens.shape[0], n), -1, dtype=np.int32)
    dist[:, 0] = 0
    active = np.arange(gens.shape[0])                            # rows still growing
    frontier = np.zeros((active.size, n), dtype=bool)
    frontier[:, 0] = True
    level = 0
    while active.size:
        level += 1
        rows = np.arange(active.size)
        windows = sliding_window_view(np.concatenate([frontier, frontier], axis=1), n, axis=1)
        reach = np.zeros_like(frontier)
        for j in range(starts.shape[1]):
            reach |= windows[rows, starts[active, j]]
        sub = dist[active]
        frontier = reach & (sub < 0)
        sub[frontier] = level
        dist[active] = sub
        alive = frontier.any(axis=1)
        active, frontier = active[alive], frontier[alive]
    return dist


def best_circulant(n: int, d: int) -> Topology:
    """The circulant of even degree d on n nodes with the least diameter found, ties broken
    by the least total distance (total-hop latency), then the smallest generators.

    Exhaustive — so truly the best — over all multisets of d/2 generators in 1..⌊n/2⌋ with
    gcd 1 while that is cheap (EXHAUSTIVE_BUDGET). Beyond it, d = 4 returns Thm 22's
    C(n,{m,m+1}) (provably minimum diameter); d > 4 compares the multi-arc Thm 22 circulant
    with a fixed pseudo-random sample of distinct generator sets (best found, not proven).
    """
    if d < 2 or d % 2:
        raise TopofinderError(f"a circulant needs an even degree d >= 2, got d = {d}")
    if n < 2:
        raise TopofinderError(f"a circulant needs n >= 2 nodes, got n = {n}")
    k, half = d // 2, n // 2
    if comb(half + k - 1, k) * n <= EXHAUSTIVE_BUDGET:
        cands = np.array([c for c in combinations_with_replacement(range(1, half + 1), k)
                          if gcd(n, *c) == 1], dtype=np.int64)
    elif k == 2:
        return optimal_circulant(n, d)
    else:
        cands = np.vstack([_sampled_generator_sets(n, k, EXHAUSTIVE_BUDGET // n),
                           [sorted(_theorem22_generators(n, d))]])
    dist = circulant_distances_batch(n, cands)
    key = np.lexsort((dist.sum(axis=1), dist.max(axis=1)))   # stable: smallest gens on ties
    return circulant(n, [int(a) for a in cands[key[0]]])


def _theorem22_generators(n: int, d: int) -> list[int]:
    m, k = theorem22_step(n), d // 2
    return [m] * ((k + 1) // 2) + [m + 1] * (k // 2)


def _sampled_generator_sets(n: int, k: int, count: int) -> np.ndarray:
    """Up to ``count`` distinct sorted k-sets from 1..⌊n/2⌋ with gcd(n, set) = 1, drawn with a
    seed fixed by (n, k) so the answer is reproducible."""
    rng = np.random.default_rng(n * 1009 + k)
    draws = np.sort(rng.random((max(count, 1), n // 2)).argsort(axis=1)[:, :k] + 1, axis=1)
    draws = np.unique(draws, axis=0)
    return draws[np.gcd.reduce(np.hstack([draws, np.full((len(draws), 1), n)]), axis=1) == 1]
