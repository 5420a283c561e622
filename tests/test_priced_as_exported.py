"""What a search recommends is what it exports: every frontier point's allreduce time is the
time T_L·α + τ·M/B of the replayed allreduce schedule that `export --what schedule
--collective allreduce` writes for it — also where the topology is not reverse-symmetric and
the reduce-scatter costs more than the allgather (Pi(3,20): paper 001 Thm 1 vs Thm 2)."""

from __future__ import annotations

from fractions import Fraction

import pytest

import topofinder as tf
from topofinder.export.msccl.reimport import schedule_from_xml
from topofinder.export.msccl.writer import to_msccl_xml
from topofinder.model.schedule import validate


@pytest.mark.parametrize("n,d,size", [(20, 3, "560KB"), (30, 4, "1MB"), (64, 4, "1MB"),
                                      (16, 2, "64MB")])
def test_allreduce_price_is_the_exported_schedule(n, d, size):
    w = tf.Workload.from_strings(size=size)
    result = tf.search(n, d, w, jobs=1)
    for p in result.frontier:
        s = tf.schedule(p.expr, "allreduce")
        validate(s)
        assert (s.num_steps, str(s.tau.numerator) + "/" + str(s.tau.denominator)) == \
            (p.allreduce_T_L, p.allreduce_tau_exact), p.expr
        assert p.allreduce_time_s == pytest.approx(w.collective_time(s.num_steps, float(s.tau)),
                                                   rel=1e-12)


def test_a_non_reverse_symmetric_point_pays_for_its_reduce_scatter():
    result = tf.search(20, 3, tf.Workload.from_strings(size="560KB"), jobs=1)
    costly = [p for p in result.frontier if p.allreduce_tau_exact != _twice(p.tau_exact)]
    assert costly, "expected a point whose reduce-scatter on G^T costs more than its allgather"
    best = result.best
    for p in result.frontier:
        assert best.objective_s <= p.objective_s


def _twice(text: str) -> str:
    num, den = map(int, text.split("/"))
    x = 2 * Fraction(num, den)
    return f"{x.numerator}/{x.denominator}"


@pytest.mark.parametrize("expr", ["Bi(UniRing(1,5))", "Bi(Diamond)", "BiRing(2,5)*2",
                                  "L(K(3))*2", "DBJ(3,2)*2", "L^2(C(8,{1,2}))"])
def test_export_is_never_dominated_by_bfb_on_the_same_topology(expr):
    """No silent substitution of a worse schedule: what `export` writes is the named
    construction unless BFB on the same arcs is at least as good in both T_L and τ (or the
    construction does not apply, as degree expansion of a base with self-loops)."""
    from topofinder.scoring.allgather.bfb import bfb_score

    s = tf.schedule(expr)
    validate(s)
    best = bfb_score(s.topology)
    assert not (best.T_L <= s.num_steps and best.tau <= s.tau
                and (best.T_L, best.tau) != (s.num_steps, s.tau)), (expr, s.num_steps, s.tau)
    info = tf.score(expr)
    assert (info["T_L"], info["tau_bfb_exact"]) == (best.T_L, f"{best.tau.numerator}/"
                                                     f"{best.tau.denominator}")


def test_a_construction_that_does_not_apply_is_reported_not_refused():
    info = tf.score("DBJ(3,2)*2")
    assert "not applicable" in info["schedule_note"]
    assert tf.schedule("DBJ(3,2)*2").method == "bfb"
    assert tf.score("Bi(UniRing(1,5))")["schedule_T_L"] == 4
    assert tf.schedule("Bi(UniRing(1,5))").num_steps == 2


@pytest.mark.parametrize("n,d", [(20, 3), (30, 4)])
def test_the_exported_xml_replays_to_the_searched_price(n, d):
    """Issue 28: the MSCCL XML of every frontier point's allreduce, read back by executing it
    (schedule_from_xml), is a valid schedule with the (T_L, τ) the search priced."""
    result = tf.search(n, d, tf.Workload.from_strings(size="1MB"), jobs=1)
    for p in result.frontier:
        s = tf.schedule(p.expr, "allreduce")
        back = schedule_from_xml(to_msccl_xml(s), s.topology)
        validate(back)
        assert (back.num_steps, f"{back.tau.numerator}/{back.tau.denominator}") == \
            (p.allreduce_T_L, p.allreduce_tau_exact), p.expr
