"""Planning at scale (issue 31): baselines past the replay limit are replayed by symmetry or
take closed forms equal to their full replay on small N, a search never fails on a baseline,
and bases and frontier points whose exact score or replay would cost O(N²) beyond the limits
are left out with a reason instead of exhausting time and memory."""

from __future__ import annotations

from fractions import Fraction

import pytest

from topofinder.finder import baseline_scores as baselines, verify
from topofinder.finder.recipe import from_expression
from topofinder.model.schedule import validate
from topofinder.scoring.allgather.ring_and_two_tree import (
    ring_allgather, two_tree_allgather, two_tree_cost,
)


@pytest.mark.parametrize("m", [2, 3, 5, 8, 17, 64, 100, 255, 1024])
def test_two_tree_closed_form_equals_replay(m):
    s = two_tree_allgather(m)
    validate(s)
    assert two_tree_cost(m) == (s.num_steps, s.tau)


@pytest.mark.parametrize("expr, schedule", [("ShiftedRing(4,64)", "ring"),
                                            ("DBT(64)", "double-binary-tree"),
                                            ("Torus(8,8)", "bfb"), ("Torus(4,4,4)", "bfb")])
def test_closed_forms_past_the_limit_equal_the_replayed_values(monkeypatch, expr, schedule):
    full = (two_tree_allgather(64) if schedule == "double-binary-tree" else
            ring_allgather(4, 64) if schedule == "ring" else
            verify.allgather_schedule(from_expression(expr)))
    validate(full)                                       # the schedule built and replayed
    replayed = baselines.native_cost(expr, schedule)
    assert replayed[:2] == (full.num_steps, full.tau)
    monkeypatch.setattr(baselines, "REPLAY_LIMIT", 10)
    closed = baselines.native_cost(expr, schedule)
    assert closed[:2] == replayed[:2]
    # the ring and the torus are replayed by symmetry at any size; DBT takes its closed form
    assert closed[2] == (None if schedule == "double-binary-tree" else "symmetry")


def test_ring_by_symmetry_equals_the_full_ring():
    full = ring_allgather(6, 35)
    validate(full)
    assert baselines.native_cost("ShiftedRing(6,35)", "ring") == (34, full.tau, "symmetry")
    assert full.tau == Fraction(34, 35)


def test_a_baseline_past_the_limit_is_scored_not_refused(monkeypatch):
    monkeypatch.setattr(baselines, "REPLAY_LIMIT", 10)
    v = baselines.score_baseline("DBT(32)", "double-binary-tree", False)
    assert v["verified"] is False and v["verified_by"] is None
    assert (v["T_L"], Fraction(v["tau"])) == two_tree_cost(32)
    assert v["alltoall_f_upper"] is None and "not computed" in v["alltoall_method"]
    t = baselines.score_baseline("Torus(4,8)", "bfb", False)     # vertex-transitive: all facts
    assert t["verified_by"] == "symmetry" and t["diameter"] == 6 and t["alltoall_f"] is not None


def test_dense_bases_beyond_the_limit_are_left_out(monkeypatch):
    assert verify.score_base("Pi(8,64)", "bfb") is not None       # 8 in-neighbours > 6 slots
    monkeypatch.setattr(verify, "DENSE_SCORE_MAX_NODES", 63)
    assert verify.score_base("Pi(8,64)", "bfb") is None
    assert verify.score_base("Pi(4,64)", "bfb") is not None       # streamed scorer: any N
    assert verify.score_base("C(64,{1,7,21,30})", "bfb") is not None   # vertex-transitive


def test_bases_without_symmetry_past_the_score_limit_are_left_out_with_a_reason(monkeypatch):
    from topofinder.families.build import parse

    monkeypatch.setattr(verify, "SCORE_MAX_N2D", 64 * 64 * 4 - 1)
    assert verify.score_base("Pi(4,64)", "bfb") is None
    assert "not scored" in verify.unscored_reason(parse("Pi(4,64)"))
    assert verify.unscored_reason(parse("C(64,{1,7,21,30})")) is None    # vertex-transitive
    assert verify.score_base("C(64,{1,7,21,30})", "bfb") is not None


def test_points_that_cannot_be_replayed_are_left_out_and_uncover_the_next(monkeypatch):
    """Past the replay limit, a predicted point without an orbit form is dropped with its
    predicted values and reason; the frontier is the Pareto frontier of the candidates with an
    orbit form (replayed by symmetry)."""
    from topofinder.finder import frontier as fr
    from topofinder.finder.growth import pareto

    final = fr.final_candidates(198, 4, jobs=1, use_cache=False)
    predicted = pareto(final, with_flags=False)
    assert fr.verifiable_frontier(final) == (predicted, [])      # all within the limit
    monkeypatch.setattr(verify, "REPLAY_LIMIT", 10)
    front, skipped = fr.verifiable_frontier(final)
    assert front and skipped
    assert {s["expr"] for s in skipped} & {c.expr for c in front} == set()
    # Pi(4,198) is Aff(198,194,·) rewired: gcd(198, 193) = 1, so no translation is an
    # automorphism, and no other group is known
    assert "Pi(4,198)" in {s["expr"] for s in skipped}
    assert all(verify.symmetric_allgather(c.recipe) is not None for c in front)
    # the same frontier from the orbit schedules themselves (not the cheap group test)
    symmetric = [c for c in final if verify.symmetric_allgather(c.recipe) is not None]
    assert front == pareto(symmetric, with_flags=False)


def test_a_replay_by_symmetry_past_the_row_budget_is_left_out(monkeypatch):
    """A point with an orbit form whose replay by symmetry (sources × N·d rows, doubled for
    BFB on G^T) exceeds the budget is left out, saying so."""
    from topofinder.finder.growth import Candidate
    from topofinder.finder.recipe import from_expression

    # Aff(40,29,·) has the translations by multiples of 40/gcd(40, 28) = 10: with C(5)'s
    # rotations, 10 orbits; not reverse-symmetric
    recipe = from_expression("C(5,{1}) x Aff(40,29,{3,5})")
    c = Candidate(recipe, 200, 4, 9, Fraction(199, 200))
    monkeypatch.setattr(verify, "REPLAY_LIMIT", 10)
    assert verify.unverifiable_reason(c) is None
    monkeypatch.setattr(verify, "SYMMETRY_REPLAY_LIMIT", 2 * 10 * 200 * 4 - 1)
    assert "10 orbits" in verify.unverifiable_reason(c)
