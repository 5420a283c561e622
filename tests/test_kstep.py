"""k-step allgather (topofinder.scoring.allgather.kstep): the time-expanded LP bound, its symmetry
reduction, and routed schedules checked by the independent replay validator."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

from topofinder.errors import TopofinderError
from topofinder.families.build import parse
from topofinder.model.schedule import validate
from topofinder.scoring.allgather import kstep
from topofinder.scoring.allgather.bfb import bfb_score
from topofinder.workload.rank import search

#: small vertex-transitive topologies (Cayley graphs and a line graph of K_3)
VERTEX_TRANSITIVE = ["K(4)", "C(7,{1,2})", "C(8,{1,3})", "C(9,{1,2})", "DC(7,{1,2})",
                     "DC(8,{1,3})", "H(2,3)", "Hypercube(3)", "Torus(3,3)", "L(K(3))",
                     "C(12,{1,5})"]

#: paper examples (issue 18): expr → (BFB τ at k = D, bound at k = D + 1). The bounds at D+1
#: equal the bandwidth optimum (N−1)/N except Kautz(2,2) (an independent computation).
EXAMPLES = {"L(C(4,{1,2}))": (Fraction(5, 4), Fraction(15, 16)),
            "Pi(3,20)": (Fraction(27, 20), Fraction(19, 20)),
            "L(K(3))": (Fraction(1), Fraction(5, 6)),
            "Kautz(2,2)": (Fraction(7, 6), Fraction(29, 30))}


def _close(a: float, b, tol: float = 1e-7) -> bool:
    return abs(a - float(b)) <= tol


@pytest.mark.parametrize("expr", VERTEX_TRANSITIVE)
def test_reduced_lp_equals_unreduced_and_stays_below_bfb(expr):
    topo = parse(expr)
    sym = kstep.symmetry(topo)
    assert sym.reps.size == 1                        # vertex-transitive: one LP source
    d = topo.diameter
    bfb = bfb_score(topo).tau
    for k in (d, d + 1):
        reduced = kstep.lower_bound(topo, k, sym=sym)
        full = kstep.lower_bound(topo, k, use_group=False)
        assert full.sources == topo.n
        assert _close(reduced.tau, full.tau), (k, reduced.tau, full.tau)
        # a lower bound on every schedule: never above BFB (a D-step schedule) ...
        assert reduced.tau <= float(bfb) + 1e-9
        # ... and never below the bandwidth optimum (every node receives N−1 shards over d)
        assert reduced.tau >= (topo.n - 1) / topo.n - 1e-9


def test_generators_are_automorphisms_and_orbits_partition():
    topo = parse("L(C(4,{1,2}))")
    sym = kstep.symmetry(topo)
    arcs = {(int(u), int(w)): int(c) for u, w, c in zip(sym.links.tail, sym.links.head, sym.links.cap)}
    assert sym.generators
    for g in sym.generators:
        assert {(int(g[u]), int(g[w])): c for (u, w), c in arcs.items()} == arcs
    # L(C(4,{1,2})) has nodes of two kinds (arcs ±1 and the double arc +2): two orbits under
    # the full group (bliss)
    assert sym.reps.size == 2
    assert sorted(np.bincount(sym.vertex_orbit).tolist()) == [8, 8]


@pytest.mark.parametrize("expr", sorted(EXAMPLES))
def test_paper_examples_bound_and_routed(expr):
    topo = parse(expr)
    bfb_tau, bound_next = EXAMPLES[expr]
    assert bfb_score(topo).tau == bfb_tau
    d = topo.diameter
    at_d = kstep.lower_bound(topo, d)
    at_next = kstep.lower_bound(topo, d + 1)
    assert at_d.tau <= float(bfb_tau) + 1e-9
    assert _close(at_next.tau, bound_next)
    assert at_next.tau_fraction == bound_next
    for k, bound in ((d, at_d), (d + 1, at_next)):
        routed = kstep.routed_schedule(topo, k)
        s = routed.schedule
        validate(s)                                  # the independent replay
        assert s.num_steps <= k and s.method == "kstep"
        assert float(s.tau) >= bound.tau - 1e-9      # nothing routed beats the relaxation
        assert routed.master_tau >= bound.tau - 1e-7
        if k == d:
            assert s.tau <= bfb_tau
        else:
            assert s.tau < bfb_tau                   # one step more pays off


def _all_timed_arborescences(sym, r, k):
    """Every timed spanning arborescence from r with arrival steps ≤ k (brute force)."""
    n = sym.n
    others = [v for v in range(n) if v != r]
    ins = {v: [(int(u), a) for a, (u, w) in enumerate(zip(sym.links.tail, sym.links.head)) if w == v]
           for v in others}
    trees = []
    for arrive in itertools.product(range(1, k + 1), repeat=len(others)):
        a = dict(zip(others, arrive))
        a[r] = 0
        choices = [[(a[v] - 1, arc) for u, arc in ins[v] if a[u] < a[v]] for v in others]
        if any(not c for c in choices):
            continue
        trees.extend(np.array(t, np.int64) for t in itertools.product(*choices))
    return trees


@pytest.mark.parametrize("expr,k", [("L(K(3))", 2), ("L(K(3))", 3), ("DC(5,{1,2})", 3),
                                    ("C(5,{1,2})", 2)])
def test_brute_force_tree_mix_sits_between_bound_and_column_generation(expr, k):
    """Enumerate every timed arborescence of a tiny vertex-transitive graph and solve the
    tree-mix LP exactly: the network-coding bound is ≤ it, the column generation's master
    (heuristic pricing) is ≥ it, and here it finds it."""
    topo = parse(expr)
    sym = kstep.symmetry(topo)
    assert sym.reps.size == 1
    r = int(sym.reps[0])
    trees = _all_timed_arborescences(sym, r, k)
    n_orb = sym.num_arc_orbits
    sizes = sym.orbit_size
    cap = sym.orbit_cap
    m = len(trees)
    a_ub = np.zeros((k * n_orb, m + k))
    for j, t in enumerate(trees):
        for step, arc in t:
            o = sym.arc_orbit[arc]
            a_ub[step * n_orb + o, j] += topo.n / sizes[o]
    for step in range(k):
        a_ub[step * n_orb:(step + 1) * n_orb, m + step] = -cap
    res = linprog(np.r_[np.zeros(m), np.ones(k)], A_ub=a_ub, b_ub=np.zeros(k * n_orb),
                  A_eq=np.r_[np.ones(m), np.zeros(k)][None, :], b_eq=[1.0], method="highs")
    best = res.fun * topo.degree / topo.n
    bound = kstep.lower_bound(topo, k).tau
    routed = kstep.routed_schedule(topo, k)
    assert bound <= best + 1e-9
    assert routed.master_tau >= best - 1e-9
    assert _close(routed.master_tau, best)
    validate(routed.schedule)
    assert float(routed.schedule.tau) >= best - 1e-9


def test_ring_needs_all_its_steps():
    """UniRing(1,5): the only schedule forwards around the ring, one shard a step for N−1
    steps: τ = (N−1)/N exactly, for the bound and the routed schedule."""
    topo = parse("UniRing(1,5)")
    b = kstep.lower_bound(topo, 4)
    assert b.tau_fraction == Fraction(4, 5)
    s = kstep.routed_schedule(topo, 4).schedule
    validate(s)
    assert s.tau == Fraction(4, 5)


def test_bad_step_budget_is_one_clear_error():
    topo = parse("C(7,{1,2})")
    with pytest.raises(TopofinderError, match="below the diameter"):
        kstep.lower_bound(topo, 1)
    with pytest.raises(TopofinderError, match="positive integer"):
        kstep.routed_schedule(topo, 0)


@pytest.mark.parametrize("expr,k", [("Kautz(2,2)", 4), ("L(C(4,{1,2}))", 3)])
def test_orbit_reduction_equals_unreduced_lp_without_transitivity(expr, k):
    """Not vertex-transitive: one LP source per vertex orbit, loads averaged over arc orbits
    — the same optimum as one source per vertex."""
    topo = parse(expr)
    reduced = kstep.lower_bound(topo, k)
    full = kstep.lower_bound(topo, k, use_group=False)
    assert 1 < reduced.sources < full.sources == topo.n
    assert _close(reduced.tau, full.tau)


def test_search_with_kstep_dominates_table7_at_64():
    """`search --n 64 --d 4 --kstep`: a replayed k-step point beats paper 001 Table 7's
    (T_L, τ) = (4, 1.000) at the same T_L (L(C(16,{3,4})) at k = D = 4; BFB gives τ = 1)."""
    result = search(64, 4, jobs=1, use_cache=False, kstep=True).to_dict()
    points = [p for p in result["frontier"] if p["schedule"].endswith("kstep")]
    assert points and all(p["verified"] for p in points)
    best = min((p for p in points if p["T_L"] == 4), key=lambda p: p["tau"])
    assert Fraction(63, 64) <= Fraction(best["tau_exact"]) < 1
    assert Fraction(best["tau_fc_exact"]) <= Fraction(best["tau_exact"])


@pytest.mark.slow
def test_search_with_kstep_dominates_table7_at_1024():
    """N = 1024: the line graph of a k-step schedule beats Table 7's (6, 1.020) point."""
    result = search(1024, 4, jobs=1, use_cache=False, kstep=True).to_dict()
    assert any(p["verified"] and p["T_L"] <= 6 and p["tau"] < 1.0195
               and p["schedule"].endswith("kstep") for p in result["frontier"])
