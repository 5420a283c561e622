"""A frontier per priced collective (topofinder.finder.priced, workload.rank._pareto_points):
what search recommends is the best allreduce over every candidate it scores, found by brute
force (every candidate of the size priced by verify.allreduce_price, as export writes it)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from topofinder.finder import frontier, priced
from topofinder.finder.verify import allreduce_price
from topofinder.errors import TopofinderError
from topofinder.workload.cost import Workload
from topofinder.workload.rank import search

CASES = [(92, 4), (48, 4), (60, 4), (30, 2), (100, 2)]


def _all_prices(n: int, d: int) -> dict:
    """Every candidate search scores for (n, d) with its exact exported allreduce."""
    out = {}
    for c in frontier.final_candidates(n, d, jobs=1, use_cache=False, whole=True):
        try:
            out[c.expr] = allreduce_price(c)
        except TopofinderError:
            pass
    return out


@pytest.mark.parametrize("n,d", CASES)
def test_recommendation_is_the_best_allreduce_of_every_scored_candidate(n, d):
    prices = _all_prices(n, d)
    for size in ("1MB", "100MB", "1GB"):
        w = Workload.from_strings("10us", "100Gbps", size)
        best = min(w.collective_time(t, float(tau)) for t, tau in prices.values())
        got = search(n, d, w, jobs=1, use_cache=False).best
        assert got.allreduce_time_s == pytest.approx(best, rel=1e-12), (size, got.expr)


def test_n92_recommends_the_allreduce_the_allgather_frontier_lost():
    """Issue 39: C(92,{1,14}) (allgather (7, 91/92), dominated by Aff(92,81,...)'s (6, 91/92))
    exports the better allreduce (14, 182/92): 16.735 ms at 100 MB, 10 µs, 100 Gbps."""
    result = search(92, 4, Workload.from_strings("10us", "100Gbps", "100MB"), jobs=1,
                    use_cache=False)
    best = result.best
    assert (best.allreduce_T_L, Fraction(best.allreduce_tau_exact)) == (14, Fraction(182, 92))
    assert best.allreduce_time_s <= 16.735e-3
    assert best.frontiers == ("allreduce",)
    on = {p.expr: p.frontiers for p in result.frontier}
    assert "allgather" in on["Aff(92,81,{9,21,45,57})"]


@pytest.mark.parametrize("n,d", [(92, 4), (256, 4)])
def test_lazy_allreduce_frontier_is_the_brute_force_pareto_set(n, d):
    """priced_pareto prices only what its bounds leave open, yet finds every allreduce price
    on the Pareto frontier of all candidates' prices."""
    pool = frontier.final_candidates(n, d, jobs=1, use_cache=False, whole=True)
    prices = {}
    for c in pool:
        try:
            prices[c.recipe] = allreduce_price(c)
        except TopofinderError:
            pass
    brute = {p for p in prices.values()
             if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in prices.values())}
    memo = {}
    lazy = priced.priced_pareto(pool, priced.PRICED["allreduce"], memo)
    assert {prices[c.recipe] for c in lazy} == brute
    for c in pool:                                     # every bound is below the price
        if c.recipe in prices:
            for bound in priced.PRICED["allreduce"].bounds:
                b = bound(c)
                assert b[0] <= prices[c.recipe][0] and b[1] <= prices[c.recipe][1], c.expr


def test_each_point_names_the_frontiers_it_is_on():
    """A point is kept only when it is on some frontier, and on each it names nothing of
    the same frontier is strictly better in both figures."""
    w = Workload.from_strings("10us", "100Gbps", "64MB", alltoall_share=0.3)
    points = search(92, 4, w, jobs=1, use_cache=False).frontier
    key = {"allgather": lambda p: (p.T_L, Fraction(p.tau_exact)),
           "allreduce": lambda p: (p.allreduce_T_L, Fraction(p.allreduce_tau_exact)),
           "alltoall": lambda p: (p.alltoall_time_s,)}
    for p in points:
        assert p.frontiers
        for name in p.frontiers:
            if name in key:
                assert not any(all(a < b for a, b in zip(key[name](q), key[name](p)))
                               for q in points), (p.expr, name)
