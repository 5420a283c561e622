"""Minimum-diameter circulants (paper 001 App. F.4, Thm 22; Boesch & Wang 1985 [18]).

Thm 22: for n > 6 and m = ⌈(−1 + √(2n−1))/2⌉, C(n,{m,m+1}) has diameter m, the minimum over
all 2-generator circulants C(n,{a1,a2}). App. F.4 extends it to any even degree d ≥ 4 with
multi-arcs: the d/2 generator pairs are m and m+1 repeated. Distances of a circulant are the
same from every node (vertex-transitive), so one BFS from node 0 gives them all.

`best_circulant` compares candidates by (diameter, total distance from node 0), each found by
a bit-parallel BFS on one Python integer (the ring's n bits), stopping as soon as a candidate
cannot beat the best so far.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations_with_replacement
from math import comb, gcd

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from topofinder.errors import TopofinderError
from topofinder.families.basic import circulant
from topofinder.model.topology import Topology

#: best_circulant's work per call, in units of about 0.3 ns: a candidate costs about
#: k·(D + 1)·(n + 256) + 32768 units (k generators, diameter D, n nodes); ≤ ~30 ms a call.
SEARCH_WORK = 60_000_000
_MOVES = (1, -1, 2, -2, 3, -3, 5, -5, 8, -8)      # local-search steps for one generator


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

    d = 2: every connected C(n,{a}) is the n-cycle (x ↦ a·x is an isomorphism), so C(n,{1}).
    Exhaustive — so truly the best — over all multisets of d/2 generators in 1..⌊n/2⌋ with
    gcd 1 while they fit in SEARCH_WORK. Beyond it, d = 4 returns Thm 22's C(n,{m,m+1})
    (provably minimum diameter); d > 4 is a best-found search: the App. F.4 multi-arc Thm 22
    circulant, a fixed pseudo-random sample of sets containing 1 (any set with a unit
    generator is isomorphic to one containing 1, x ↦ a⁻¹x), then steepest-descent moves of
    one generator at a time from the best samples, until the work is spent or the lattice
    Moore bound (`_lattice_bound`) is met. Deterministic: seeded by (n, d), no timing; the
    answer is memoised per process (the finder asks for the same (n, d) in many searches).
    """
    if d < 2 or d % 2:
        raise TopofinderError(f"a circulant needs an even degree d >= 2, got d = {d}")
    if n < 2:
        raise TopofinderError(f"a circulant needs n >= 2 nodes, got n = {n}")
    return circulant(n, list(best_generators(n, d)))


@lru_cache(maxsize=1 << 16)
def best_generators(n: int, d: int) -> tuple[int, ...]:
    """The generator multiset `best_circulant` picks (arguments already validated)."""
    k, half = d // 2, n // 2
    if k == 1:
        return (1,)
    search = _Search(n, k)
    if comb(half + k - 1, k) <= search.budget:
        for gens in combinations_with_replacement(range(1, half + 1), k):
            search.consider(gens)
            if search.best == search.bound:          # later sets could only tie
                break
    elif k == 2:
        return tuple(_theorem22_generators(n, d))
    else:
        search.consider(_theorem22_generators(n, d))
        rng = np.random.default_rng(n * 1009 + k)
        draws = rng.integers(2, half + 1, size=(search.budget // 2, k - 1))
        found = [(r, search.key([1] + g)) for g in draws.tolist()
                 if (r := search.consider([1] + g))]
        for _, gens in sorted(found):
            if search.done():
                break
            search.descend(gens)
    return search.best_gens


class _Search:
    """Candidate generator sets of C(n, ·) with k generators, scored once each."""

    def __init__(self, n: int, k: int):
        self.n, self.k = n, k
        self.bound = _lattice_bound(n, k)
        self.budget = max(SEARCH_WORK // (k * (self.bound[0] + 1) * (n + 256) + 32768), 16)
        self.seen: dict[tuple[int, ...], tuple[int, int] | None] = {}
        self.lookups = 0
        self.best: tuple[int, int] = (n, n * n)
        self.best_gens: tuple[int, ...] = ()

    def done(self) -> bool:
        """Work spent (a repeated candidate costs 1/16 of a new one) or the bound is met."""
        return len(self.seen) + self.lookups // 16 >= self.budget or self.best == self.bound

    def key(self, gens) -> tuple[int, ...]:
        """The generator multiset in canonical form: each a as min(a, n − a), sorted."""
        return tuple(sorted(min(a % self.n, self.n - a % self.n) for a in gens))

    def consider(self, gens) -> tuple[int, int] | None:
        """(diameter, total distance) of C(n, gens) if it can beat the best so far (None when
        it cannot or is disconnected); the best is updated on a strict improvement."""
        n = self.n
        key = self.key(gens)
        self.lookups += 1
        if key in self.seen:
            return self.seen[key]
        score = None
        if 0 not in key and gcd(n, *key) == 1:
            score = _diameter_and_total(n, key, self.best[0])
            if score is not None and score < self.best:
                self.best, self.best_gens = score, key
        self.seen[key] = score
        return score

    def descend(self, gens) -> None:
        """Steepest descent from ``gens``: move one generator (not the leading 1) by a step of
        _MOVES while that improves (diameter, total distance)."""
        current, score = list(gens), self.seen[gens]
        while not self.done():
            step = None
            for i in range(1, self.k):
                for delta in _MOVES:
                    trial = current.copy()
                    trial[i] += delta
                    s = self.consider(trial)
                    if s is not None and s < score and (step is None or s < step[0]):
                        step = (s, list(self.key(trial)))
            if step is None:
                return
            score, current = step


def _diameter_and_total(n: int, gens, limit: int) -> tuple[int, int] | None:
    """(diameter, Σ hops from 0) of C(n, gens) by BFS on an n-bit integer (rotation by s reads
    the doubled frontier shifted by n − s); None when disconnected or the diameter exceeds
    ``limit``."""
    shifts = {n - a for a in gens} | set(gens)
    unreached = (1 << n) - 2
    frontier = 1
    level = total = 0
    while unreached:
        level += 1
        if level > limit:
            return None
        doubled = frontier | (frontier << n)
        new = 0
        for s in shifts:
            new |= doubled >> s
        new &= unreached
        if not new:
            return None
        total += level * new.bit_count()
        unreached ^= new
        frontier = new
    return level, total


def _lattice_bound(n: int, k: int) -> tuple[int, int]:
    """Lower bounds (diameter, total distance) for any k-generator circulant on n nodes: at
    most |S_k(r)| = |B_k(r)| − |B_k(r−1)| nodes lie at distance r, where
    |B_k(r)| = Σ_i 2^i·C(k,i)·C(r,i) counts the points of Z^k with L1 norm ≤ r."""
    def ball(r):
        return sum(2 ** i * comb(k, i) * comb(r, i) for i in range(min(k, r) + 1))

    r = total = 0
    covered = 1
    while covered < n:
        r += 1
        take = min(ball(r) - ball(r - 1), n - covered)
        total += r * take
        covered += take
    return r, total


def _theorem22_generators(n: int, d: int) -> list[int]:
    m, k = theorem22_step(n), d // 2
    return [m] * ((k + 1) // 2) + [m + 1] * (k // 2)
