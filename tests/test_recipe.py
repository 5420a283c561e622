"""Recipes: expressions ↔ constructions, and the schedules they name (paper 001 §5)."""

import json
from fractions import Fraction

import pytest

from topofinder.cli.main import main
from topofinder.families.build import parse
from topofinder.finder.recipe import from_expression
from topofinder.model.schedule import validate
from topofinder.finder.verify import build_schedule, build_topology, collective_schedule


@pytest.mark.parametrize("expr,method", [
    ("L^2(Diamond^2)", "line-graph"), ("(UniRing(1,4) x UniRing(1,8))^2", "cartesian-power"),
    ("Bi(DBJ(2,3))", "bidirectional"), ("C(8,{1,2})*2", "degree"), ("Pi(4,64)", "bfb"),
    ("T(Pi(4,16))", "bfb"), ("Diamond", "catalog"), ("K(3) x C(5,{1})", "bfb"),
])
def test_expression_round_trip_and_method(expr, method):
    recipe = from_expression(expr)
    assert recipe.expr == parse(expr).expr and recipe.method == method
    assert from_expression(recipe.expr) == recipe
    assert build_topology(recipe).same_arcs(parse(expr))


@pytest.mark.parametrize("expr,t_l,tau", [
    # paper 001 Table 7 values of the constructions the expressions name
    ("Diamond^2", 6, Fraction(63, 64)), ("L(Diamond^2)", 7, Fraction(1)),
    ("L(K(4,4))", 3, Fraction(1)), ("DBJMod(2,4)^2", 10, Fraction(255, 256)),
])
def test_named_schedules_replay_to_table7(expr, t_l, tau):
    schedule = build_schedule(from_expression(expr))
    validate(schedule)
    assert (schedule.num_steps, schedule.tau) == (t_l, tau)


@pytest.mark.parametrize("collective", ["reduce-scatter", "allreduce"])
def test_collectives_of_a_named_schedule(collective):
    # Diamond^2 is reverse-symmetric (the catalog stores the isomorphism): Thm 2 applies;
    # allreduce costs exactly twice the allgather (Appendix B)
    schedule = collective_schedule(from_expression("Diamond^2"), collective)
    validate(schedule)
    factor = 1 if collective == "reduce-scatter" else 2
    assert schedule.num_steps == 6 * factor and schedule.tau == factor * Fraction(63, 64)


def test_score_reports_the_named_schedule(capsys):
    assert main(["score", "Diamond", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    # BFB on the Diamond is not BW-optimal; its search-found catalog schedule is (Table 9)
    assert info["tau_bfb_exact"] == "1/1" and not info["bw_optimal"]
    assert info["schedule"] == "catalog" and info["schedule_tau_exact"] == "7/8"
    assert info["schedule_bw_optimal"] and info["schedule_T_L"] == 3


@pytest.mark.parametrize("expr", ["L^2(Diamond^2)", "Bi(DBJ(2,3))", "C(8,{1,2})*2",
                                  "(UniRing(1,4) x UniRing(1,8))^2", "L(DBJMod(2,4)^2)"])
def test_topology_alone_numbers_nodes_like_the_schedule(expr):
    recipe = from_expression(expr)
    assert build_topology(recipe).same_arcs(build_schedule(recipe).topology)
