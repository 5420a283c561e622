"""`topofinder catalog build`: enumeration up to isomorphism, DBJ rewirings, the CP-SAT
schedule search, and the search-found catalog entries (paper 001 Table 9, Fig. 19–20)."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from topofinder.finder import catalog_build
from topofinder.scoring.allgather.bfb import bfb_tau
from topofinder.families.catalog import catalog_schedule, catalog_topology, find_reverse_isomorphism
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.families import bi_ring, complete, complete_bipartite, de_bruijn, hypercube
from topofinder.families import uni_ring
from topofinder.model.schedule import validate

SEARCHED = {  # expr: (N, d, T_L, tau) of paper 001 Table 9 / Table 7
    "Diamond": (8, 2, 3, Fraction(7, 8)),
    "DBJMod(2,3)": (8, 2, 4, Fraction(7, 8)),
    "DBJMod(2,4)": (16, 2, 5, Fraction(15, 16)),
    "DBJMod(3,2)": (9, 3, 3, Fraction(8, 9)),
    "DBJMod(4,2)": (16, 4, 3, Fraction(15, 16)),
}


# ---- independent helpers ---------------------------------------------------------------------
def _replay(schedule) -> list[Fraction]:
    """Own allgather replay (hold sets per node): asserts causality and completeness and
    returns the per-step max link load in chunks (unit capacities)."""
    topo, p = schedule.topology, schedule.shard_chunks
    arcs = set(zip(topo.src.tolist(), topo.dst.tolist()))
    hold = [{(v, c) for c in range(p)} for v in range(topo.n)]
    loads = []
    for t in range(1, schedule.num_steps + 1):
        rows = schedule.sends[schedule.sends[:, 0] == t]
        per_link: dict = {}
        got = []
        for _, v, lo, hi, u, w in rows.tolist():
            assert (u, w) in arcs
            for c in range(lo, hi):
                assert (v, c) in hold[u], f"step {t}: {u} sends ({v},{c}) it does not hold"
                got.append((w, (v, c)))
            per_link[(u, w)] = per_link.get((u, w), 0) + hi - lo
        for w, item in got:
            hold[w].add(item)
        loads.append(Fraction(max(per_link.values(), default=0)))
    assert all(len(h) == topo.n * p for h in hold), "some node misses a chunk"
    return loads


def _tau_from_loads(schedule) -> Fraction:
    topo = schedule.topology
    return sum(_replay(schedule), Fraction(0)) * Fraction(topo.degree,
                                                          topo.n * schedule.shard_chunks)


def _labelled_count(n: int, d: int) -> int:
    """Brute force: labelled strongly connected d-regular simple loopless digraphs on n nodes."""
    rows = [[c for c in itertools.combinations(range(n), d) if u not in c] for u in range(n)]
    count = 0
    for choice in itertools.product(*rows):
        a = np.zeros((n, n), dtype=bool)
        for u, outs in enumerate(choice):
            a[u, list(outs)] = True
        if not np.all(a.sum(axis=0) == d):
            continue
        reach = np.eye(n, dtype=bool)
        for _ in range(n):
            reach = reach | ((reach.astype(int) @ a.astype(int)) > 0)
        count += bool(reach.all())
    return count


def _automorphisms(topo) -> int:
    g = nx.DiGraph(list(zip(topo.src.tolist(), topo.dst.tolist())))
    return sum(1 for _ in nx.algorithms.isomorphism.DiGraphMatcher(g, g).isomorphisms_iter())


# ---- enumeration -----------------------------------------------------------------------------
@pytest.mark.parametrize("n,d", [(4, 2), (5, 2), (5, 3),
                                 pytest.param(6, 2, marks=pytest.mark.slow)])
def test_regular_digraphs_complete_and_distinct(n, d):
    """Orbit counting: Σ over classes N!/|Aut| equals the brute-force labelled count, so every
    class appears exactly once."""
    reps = catalog_build.regular_digraphs(n, d)
    assert sum(math.factorial(n) // _automorphisms(g) for g in reps) == _labelled_count(n, d)
    for g in reps:
        assert g.is_regular and g.degree == d and g.self_loops == 0
        assert len(set(zip(g.src.tolist(), g.dst.tolist()))) == g.num_arcs


def test_regular_digraphs_known_small_counts():
    # d = n−2: complement of a derangement, one class per cycle type of derangements of n.
    assert len(catalog_build.regular_digraphs(4, 2)) == 2      # (4), (2,2)
    assert len(catalog_build.regular_digraphs(5, 3)) == 2      # (5), (2,3)
    assert len(catalog_build.regular_digraphs(6, 4)) == 4      # (6), (2,4), (3,3), (2,2,2)


def test_regular_digraphs_diameter_filter_and_two_cycles():
    full = catalog_build.regular_digraphs(7, 2)
    small = catalog_build.regular_digraphs(7, 2, 3)
    assert len(small) == sum(g.diameter <= 3 for g in full)
    assert all(g.diameter <= 3 for g in small)
    no2 = catalog_build.regular_digraphs(7, 2, two_cycles=False)
    expect = sum(not (set(zip(g.src.tolist(), g.dst.tolist()))
                      & set(zip(g.dst.tolist(), g.src.tolist()))) for g in full)
    assert len(no2) == expect


def test_moore_bound_excludes_small_diameter():
    # N = 8, d = 2: 1 + 2 + 4 = 7 < 8 nodes within 2 hops, so no diameter-2 graph exists.
    assert catalog_build.regular_digraphs(8, 2, 2) == []


# ---- DBJ rewirings ---------------------------------------------------------------------------
@pytest.mark.parametrize("d,k", [(2, 3), (2, 4), (3, 2), (4, 2)])
def test_dbj_rewirings_structure(d, k):
    base = de_bruijn(d, k)
    arcs = set(zip(base.src.tolist(), base.dst.tolist()))
    bad = {(u, w) for u, w in arcs if u == w or (w, u) in arcs}
    freed = {u for u, _ in bad}
    reps = catalog_build.dbj_rewirings(d, k)
    assert reps
    for g in reps:
        got = set(zip(g.src.tolist(), g.dst.tolist()))
        assert len(got) == g.num_arcs and g.self_loops == 0 and g.is_regular
        assert g.degree == d
        assert not any((w, u) in got for u, w in got), "a 2-cycle survived"
        new = got - (arcs - bad)
        assert len(new) == len(freed)
        # the new arcs form one cycle through all freed nodes (Fig. 20 caption)
        nxt = dict(new)
        x, seen = next(iter(freed)), set()
        while x not in seen:
            seen.add(x)
            x = nxt[x]
        assert seen == freed


def test_dbj_42_rewirings_commute_with_digit_shift():
    """Beyond 10^5 cycles only those commuting with x_i → x_i + 1 (mod d) are enumerated."""
    d, k = 4, 2
    shift = [((x // d + 1) % d) * d + (x % d + 1) % d for x in range(d ** k)]
    for g in catalog_build.dbj_rewirings(d, k):
        arcs = set(zip(g.src.tolist(), g.dst.tolist()))
        assert {(shift[u], shift[w]) for u, w in arcs} == arcs


# ---- CP-SAT schedule search ------------------------------------------------------------------
@pytest.mark.parametrize("topo,steps,chunks,tau", [
    (complete(3), 1, 1, Fraction(2, 3)),          # K(3): one step, BW-optimal
    (uni_ring(1, 4), 3, 1, Fraction(3, 4)),       # ring: N−1 steps, BW-optimal
    (bi_ring(2, 4), 2, 1, Fraction(1)),           # P = 1: each step carries ≥ 1 → Σ ≥ 2
    (bi_ring(2, 4), 2, 2, Fraction(3, 4)),        # P = 2 reaches (N−1)/N
    (complete_bipartite(2), 2, 2, Fraction(3, 4)),  # paper Fig. 1
    (hypercube(3), 3, 1, Fraction(9, 8)),         # P = 1: Σ_t L_t ≥ 3 → 3·3/8
    (hypercube(3), 3, 3, Fraction(7, 8)),         # (N−1)/N needs Σ L_t = 7 → P = 3
])
def test_search_schedule_optimal(topo, steps, chunks, tau):
    res = catalog_build.search_schedule(topo, steps, chunks, time_limit=30)
    assert res.status == "optimal"
    assert res.schedule.tau == tau == res.lower_bound
    assert res.schedule.num_steps <= steps
    validate(res.schedule)
    assert _tau_from_loads(res.schedule) == tau


def test_search_schedule_infeasible():
    # fewer steps than the diameter: no schedule at all
    assert catalog_build.search_schedule(uni_ring(1, 4), 2, 1).status == "infeasible"
    assert catalog_build.search_schedule(complete_bipartite(2), 1, 4).status == "infeasible"
    # with P = 1 the per-step bounds are integers, so τ = 3/4 (Σ L_t = 3/2) is impossible
    res = catalog_build.search_schedule(bi_ring(2, 4), 2, 1, target=Fraction(3, 4))
    assert res.status == "infeasible" and res.schedule is None


def test_search_schedule_target_stops_at_goal():
    res = catalog_build.search_schedule(hypercube(3), 3, 3, target=Fraction(7, 8))
    assert res.schedule is not None and res.schedule.tau <= Fraction(7, 8)
    validate(res.schedule)


def test_bad_input_is_a_topofinder_error():
    with pytest.raises(TopofinderError):
        catalog_build.search_schedule(complete(3), 0, 1)
    with pytest.raises(TopofinderError):
        catalog_build.candidate_space("all", 12, 2, 4)
    with pytest.raises(TopofinderError):
        catalog_build.candidate_space("dbj", 10, 3, 3)
    with pytest.raises(TopofinderError):
        catalog_build.resolve("NoSuchBase")
    with pytest.raises(TopofinderError, match="time budget"):
        catalog_build.regular_digraphs(8, 2, 3, deadline=0.0)


# ---- build -----------------------------------------------------------------------------------
def test_build_skips_bfb_optimal_bases():
    # N = 4, d = 2 has two classes, K(2,2) and DC(4,{1,2}); BFB is BW-optimal on both
    # (Table 9), so no non-BFB base is searched for.
    res = catalog_build.build(space="all", n=4, d=2, steps=2, chunks=2)
    assert res.candidates == 2 and res.skipped_bfb_optimal == 2
    assert res.schedule is None and res.searches == []


def test_build_finds_non_bfb_base_and_writes_entry(tmp_path):
    """A small build end to end: N = 6, d = 2, 3 steps; the written entry validates."""
    res = catalog_build.build(space="all", n=6, d=2, steps=3, chunks=6, name="Test6",
                   target=Fraction(1))
    assert res.schedule is not None
    assert bfb_tau(res.topology) > res.schedule.tau
    path = catalog_build.write_result(res, "topofinder catalog build ...", "test", "all", tmp_path)
    entry = json.loads(open(path).read())
    assert entry["expr"] == "Test6" and entry["T_L"] <= 3
    assert Fraction(entry["tau"]) == res.schedule.tau <= 1
    sched = catalog_schedule("Test6", tmp_path)
    validate(sched)


def test_cli_catalog_build(capsys):
    assert main(["catalog", "build", "--n", "4", "--d", "2", "--steps", "2", "--chunks", "2",
                 "--no-write", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["builds"][0]["candidates"] == 2 and not doc["builds"][0]["found"]
    assert main(["catalog", "build", "--n", "4"]) == 2
    assert main(["catalog", "build", "Diamond", "--target", "x/y"]) == 2
    assert "--space all" in catalog_build.command_line(catalog_build.resolve("Diamond"))


# ---- the search-found catalog entries ---------------------------------------------------------
@pytest.mark.parametrize("expr", sorted(SEARCHED))
def test_searched_entries_validate(expr):
    n, d, t_l, tau = SEARCHED[expr]
    topo = catalog_topology(expr)
    sched = catalog_schedule(expr)
    validate(sched)
    assert (topo.n, topo.degree, sched.num_steps, sched.tau) == (n, d, t_l, tau)
    assert _tau_from_loads(sched) == tau
    assert topo.is_regular and topo.self_loops == 0
    arcs = set(zip(topo.src.tolist(), topo.dst.tolist()))
    assert len(arcs) == topo.num_arcs                       # no multi-arcs (Table 9)
    if expr.startswith("DBJMod"):
        assert not any((w, u) in arcs for u, w in arcs)     # no 2-cycles (Fig. 20)
    else:
        assert find_reverse_isomorphism(topo) is not None  # Diamond is reverse-symmetric
    assert bfb_tau(topo) > tau                              # BFB does not reach it
    entry = next(e for e in cb_entries() if e["expr"] == expr)
    assert "not a copy" in entry["provenance"]["source"]
    assert entry["provenance"]["command"].startswith("topofinder catalog build")


def cb_entries():
    from topofinder.families.catalog import entries
    return entries()


@pytest.mark.slow
@pytest.mark.parametrize("expr", sorted(SEARCHED))
def test_rediscovery(expr, tmp_path):
    """The full preset searches (each well under the 10-minute acceptance limit)."""
    n, d, t_l, tau = SEARCHED[expr]
    report = catalog_build.run(expr, directory=tmp_path)
    assert report["found"] and report["bw_optimal"]
    assert (report["N"], report["d"], report["T_L"], Fraction(report["tau"])) == (n, d, t_l, tau)
    assert report["seconds"] < 600
    validate(catalog_schedule(expr, tmp_path))
