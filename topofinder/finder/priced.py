"""One Pareto frontier per collective priced before verification (docs/algorithms.md "The
finder"): a point dominated on one collective can be the best on another, so the finder keeps
the union of the frontiers.

Each priced collective has a price — exact (T_L in steps, τ in M/B) of the schedule `export`
writes for it — and lower bounds, cheapest first. The frontier of a collective is exact: a
candidate is priced unless an already priced point matches or beats one of its bounds (then it
matches or beats its price). Allgather: the predicted (T_L, τ) itself. Allreduce:
`verify.allreduce_price` (reduce-scatter on Gᵀ or the allgather reversed, then the allgather;
paper 001 Thm 1, 2, App. B), bounded by allgather + reduce-scatter each taking at least the
Moore bound, then node 0's eccentricities, in steps and (N−1)/N in M/B (each node receives N−1
shards of M/N) — the allgather exactly the predicted one for a scored BFB base (elsewhere
`export` may write BFB where it beats the named construction).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
from scipy.sparse.csgraph import shortest_path

from topofinder.errors import TopofinderError
from topofinder.finder.growth import Candidate, _preference
from topofinder.finder.verify import allreduce_price, build_topology
from topofinder.model.bounds import moore_bound_steps
from topofinder.model.collectives import Collective

Price = tuple[int, Fraction]


@dataclass(frozen=True)
class Priced:
    """How one collective is priced before verification: ``price`` (exact (T_L, τ) of what
    `export` writes; TopofinderError where it cannot be priced), ``bounds`` (lower bounds on
    it, cheapest first: each is tried only when the previous one did not settle the
    candidate) and ``estimate`` (the order candidates are priced in: likely price first, so
    that good points prune the rest early; any order gives the same frontier)."""

    price: Callable[[Candidate], Price]
    bounds: tuple[Callable[[Candidate], Price], ...]
    estimate: Callable[[Candidate], Price]


def _floor(c: Candidate, steps: int) -> Price:
    """The least (T_L, τ) of an allgather or reduce-scatter of c's size that needs ``steps``
    steps: each node receives N−1 shards of M/N over its in-links."""
    return steps, Fraction(c.n - 1, c.n)


def _allgather_price(c: Candidate) -> Price:
    return c.t_l, c.tau


def _allreduce_bound(c: Candidate, steps: int) -> Price:
    """Exported allgather + reduce-scatter, each at least ``steps`` steps and (N−1)/N; the
    allgather exactly c's own for a scored BFB base (nothing replaces it)."""
    floor = _floor(c, steps)
    allgather = (c.t_l, c.tau) if c.exact and c.recipe.method == "bfb" else floor
    return allgather[0] + floor[0], allgather[1] + floor[1]


def _eccentricity(c: Candidate) -> int:
    """Steps no allgather or reduce-scatter on c's topology can undercut: the farthest any
    node is from node 0 or node 0 from any node (node 0's shard must reach every node; every
    shard must reach node 0), by two breadth-first searches, O(N·d); the Moore bound if the
    topology is not strongly connected (then it has no price)."""
    m = build_topology(c.recipe).link_matrix
    far = max(shortest_path(m, unweighted=True, indices=0).max(),
              shortest_path(m.T.tocsr(), unweighted=True, indices=0).max())
    return int(far) if np.isfinite(far) else moore_bound_steps(c.n, c.d)


#: Collective → how it is priced. Another priced collective is one more entry.
PRICED: dict[str, Priced] = {
    Collective.ALLGATHER: Priced(_allgather_price, (_allgather_price,), _allgather_price),
    Collective.ALLREDUCE: Priced(
        allreduce_price,
        (lambda c: _allreduce_bound(c, moore_bound_steps(c.n, c.d)),
         lambda c: _allreduce_bound(c, _eccentricity(c))),
        lambda c: (2 * c.t_l, 2 * c.tau)),
}


def lower_bounds(c: Candidate) -> dict[str, Price]:
    """Lower bounds on what verification can find for c (verify.verify_candidate's allgather
    and exported allreduce (T_L, τ)): node 0's eccentricities in steps and (N−1)/N in M/B per
    phase (`_floor`), the allgather exactly c's own for a scored BFB base (the strongest of
    PRICED's bounds)."""
    steps = _eccentricity(c)
    allgather = (c.t_l, c.tau) if c.exact and c.recipe.method == "bfb" else _floor(c, steps)
    return {Collective.ALLGATHER: allgather, Collective.ALLREDUCE: _allreduce_bound(c, steps)}


def no_worse(a: Price, b: Price) -> bool:
    """Whether price ``a`` is no worse than ``b`` in T_L and in τ."""
    return a[0] <= b[0] and a[1] <= b[1]


def priced_pareto(pool: list[Candidate], how: Priced, memo: dict | None = None,
                  admit: Callable[[Candidate], bool] = lambda c: True,
                  favour: frozenset = frozenset()) -> list[Candidate]:
    """The candidates no other dominates in ``how.price`` (equal prices: the preferred one,
    growth._preference), pricing lazily: in the order of ``how.estimate``, skipping a
    candidate one of whose bounds an already priced point matches or beats. ``memo``
    ({recipe: price or None}) keeps prices across calls; a candidate ``admit`` refuses
    (checked only when it would be priced), or whose price raises TopofinderError, is left
    out. Candidates whose recipe is in ``favour`` are priced first and win ties (the points
    already kept for another collective, so that a tie adds nothing to verify)."""
    memo = {} if memo is None else memo

    def rank(c: Candidate) -> tuple:
        return c.recipe not in favour, _preference(c)

    order = sorted(pool, key=lambda c: (c.recipe not in favour, *how.estimate(c), rank(c)))
    priced: list[tuple[Price, Candidate]] = []

    def settled(c: Candidate) -> bool:
        return any(any(no_worse(p, b) for p, _ in priced)
                   for b in map(lambda bound: bound(c), how.bounds))

    for c in order:
        if c.recipe not in memo:
            if settled(c):
                continue
            try:
                memo[c.recipe] = how.price(c) if admit(c) else None
            except TopofinderError:
                memo[c.recipe] = None
        if memo[c.recipe] is not None:
            priced.append((memo[c.recipe], c))
    priced.sort(key=lambda pc: (*pc[0], rank(pc[1])))
    front: list[tuple[Price, Candidate]] = []
    for p, c in priced:
        if not any(no_worse(q, p) for q, _ in front):
            front.append((p, c))
    return [c for _, c in front]


def frontiers(pool: list[Candidate], memos: dict[str, dict] | None = None,
              admit: Callable[[Candidate], bool] = lambda c: True,
              collectives: dict[str, Priced] | None = None,
              favour: frozenset = frozenset()) -> dict[str, list[Candidate]]:
    """Each priced collective's frontier (``collectives``, default PRICED) of the candidates
    of ``pool`` that ``admit`` passes (`priced_pareto`), sharing ``memos`` by name."""
    memos = {} if memos is None else memos
    return {name: priced_pareto(pool, how, memos.setdefault(name, {}), admit, favour)
            for name, how in (PRICED if collectives is None else collectives).items()}
