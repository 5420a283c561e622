"""Reduce-scatter and allreduce in orbit form (issue 31: export at N = 10^5): the reversed
allgather (Thm 2) or the reversed BFB allgather on G^T (Thm 1) under the allgather's group, and
reduce-scatter then allgather, against the full-form schedules `export` writes within the
replay limit, replayed in full; the npz round trip, `check` and `search`'s price."""

import numpy as np
import pytest

import topofinder as tf
import topofinder.api.schedules as schedules
from topofinder.errors import TopofinderError
from topofinder.export.npz import load_npz, save_npz
from topofinder.finder import verify
from topofinder.finder.growth import Candidate
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import (build_schedule, reduce_scatter_of, symmetric_allgather,
                                      symmetric_collective)
from topofinder.model.collectives import Collective
from topofinder.model.schedule import ScheduleError, allreduce, validate
from topofinder.model.symmetric import OrbitSchedule, expand, replay_by_symmetry

#: reverse-symmetric (a circulant, its line graph and square: Thm 2 through the known
#: isomorphism) and not (products with a factor without a group, a line graph of one: BFB on
#: G^T by orbits, Thm 1)
EXPRS = ["C(16,{1,6})", "L(C(16,{1,6}))", "C(8,{1,3})^2", "Aff(16,5,{3,7}) x C(9,{1,2})",
         "Pi(4,20) x C(7,{1,3})", "L(Aff(8,3,{1,3}) x C(5,{1}))",
         "UniRing(1,4) x UniRing(1,5) x Pi(2,6)"]


def _full_form(expr: str, collective: str):
    """The full-form schedule of the named construction (no BFB swap, as beyond the replay
    limit): its allgather, reduce_scatter_of it, or both as an allreduce."""
    allgather = build_schedule(from_expression(expr))
    rs = reduce_scatter_of(allgather)
    return rs if collective == Collective.REDUCE_SCATTER else allreduce(rs, allgather)


@pytest.mark.parametrize("collective", [Collective.REDUCE_SCATTER, Collective.ALLREDUCE])
@pytest.mark.parametrize("expr", EXPRS)
def test_orbit_collective_equals_the_full_form_replayed(expr, collective):
    """Replayed by symmetry; its extension replayed in full; the full-form schedule replayed
    in full: the same collective, T_L, step loads and τ (a second, independent method)."""
    orbit = symmetric_collective(from_expression(expr), collective)
    assert orbit.collective == collective and orbit.action.reps.size < orbit.topology.n
    replay_by_symmetry(orbit)
    extended = expand(orbit)
    assert extended.num_sends == orbit.num_sends * orbit.topology.n // orbit.action.reps.size
    validate(extended)
    full = _full_form(expr, collective)
    validate(full)
    assert (orbit.num_steps, orbit.step_loads, orbit.tau) == \
        (extended.num_steps, extended.step_loads, extended.tau) == \
        (full.num_steps, full.step_loads, full.tau)
    if collective == Collective.ALLREDUCE:
        assert orbit.reduce_steps == full.reduce_steps == extended.reduce_steps


@pytest.mark.parametrize("expr", EXPRS[2:5])
def test_planted_wrong_sends_fail_both_replays(expr):
    """A reduce-scatter send dropped (a contribution never arrives), and an allreduce
    allgather-phase send moved to before its chunk arrives: the replay by symmetry and the
    full replay of the extension both refuse."""
    rs = symmetric_collective(from_expression(expr), Collective.REDUCE_SCATTER)
    dropped = OrbitSchedule(rs.topology, rs.shard_chunks, np.delete(rs.sends, 0, 0),
                            rs.generators, collective=rs.collective)
    for run in (lambda: replay_by_symmetry(dropped), lambda: validate(expand(dropped))):
        with pytest.raises(ScheduleError, match="reduce|contribution|partial"):
            run()
    ar = symmetric_collective(from_expression(expr), Collective.ALLREDUCE)
    s = ar.sends.copy()
    i = int(np.flatnonzero(s[:, 0] >= ar.reduce_steps + 2)[0])
    s[i, 0] = ar.reduce_steps + 1                    # forwarded before it arrives
    early = OrbitSchedule(ar.topology, ar.shard_chunks, s, ar.generators,
                          collective=ar.collective, reduce_steps=ar.reduce_steps)
    for run in (lambda: replay_by_symmetry(early), lambda: validate(expand(early))):
        with pytest.raises(ScheduleError, match="allgather phase.*does not hold"):
            run()


@pytest.mark.parametrize("expr", EXPRS)
def test_search_prices_the_orbit_allreduce(expr, monkeypatch):
    """Beyond the replay limit (lowered) `search` (verify_candidate) and the sweep
    (allreduce_price) price the allreduce whose orbit form `export` writes."""
    recipe = from_expression(expr)
    ag = symmetric_allgather(recipe)
    c = Candidate(recipe, ag.topology.n, ag.topology.degree, ag.num_steps, ag.tau)
    monkeypatch.setattr(verify, "REPLAY_LIMIT", 10)
    point = verify.verify_candidate(c)
    ar = symmetric_collective(recipe, Collective.ALLREDUCE)
    assert point.verified_by == "symmetry"
    assert (point.allreduce_T_L, point.allreduce_tau) == (ar.num_steps, ar.tau) == \
        verify.allreduce_price(c)


@pytest.mark.parametrize("expr", ["L(C(16,{1,6}))", "Aff(16,5,{3,7}) x C(9,{1,2})"])
def test_export_npz_and_check_beyond_the_limit(tmp_path, monkeypatch, expr):
    """With REPLAY_LIMIT below N²·d, export writes reduce-scatter and allreduce as orbit npz
    (size stated first); load_npz reads the collective back; `check` replays it by symmetry
    (T_L and τ stated) and checks its sends against the plan."""
    monkeypatch.setattr(schedules, "REPLAY_LIMIT", 100)
    plan = tmp_path / "plan.csv"
    tf.export_patch_panel(expr).write_csv(plan)
    for collective in (Collective.REDUCE_SCATTER, Collective.ALLREDUCE):
        lines = []
        path = tmp_path / f"{collective}.npz"
        built, _ = tf.export_schedule_of(expr, "npz", path, collective=collective,
                                         announce=lines.append)
        assert isinstance(built, OrbitSchedule) and f"({collective}, orbit form)" in lines[0]
        back = load_npz(path)
        assert (back.collective, back.reduce_steps, back.shard_chunks) == \
            (built.collective, built.reduce_steps, built.shard_chunks)
        assert np.array_equal(back.sends, built.sends)
        report = tf.check_schedule(plan, path)
        assert f"the {collective} replayed by symmetry" in report.note
        assert f"T_L = {built.num_steps}, tau = {built.tau.numerator}/{built.tau.denominator}" \
            in report.note
        with pytest.raises(TopofinderError, match=f"its {collective} has"):
            tf.export_schedule_of(expr, "json", tmp_path / "s.json", collective=collective)


def test_orbit_npz_of_a_planted_allreduce_fails_check(tmp_path):
    """A wrong send in an allreduce npz is caught by `check`'s replay by symmetry."""
    ar = symmetric_collective(from_expression("C(16,{1,6})"), Collective.ALLREDUCE)
    s = ar.sends.copy()
    s[np.flatnonzero(s[:, 0] <= ar.reduce_steps)[0], 0] = 0     # a step numbered 0
    bad = OrbitSchedule(ar.topology, ar.shard_chunks, s, ar.generators,
                        collective=ar.collective, reduce_steps=ar.reduce_steps)
    save_npz(bad, tmp_path / "bad.npz")
    plan = tmp_path / "plan.csv"
    tf.export_patch_panel("C(16,{1,6})").write_csv(plan)
    # the .npz validator (issue 39) now refuses the step 0 before the replay would
    with pytest.raises(TopofinderError, match="reduce-scatter phase|step 0 is outside"):
        tf.check_schedule(plan, tmp_path / "bad.npz")


def test_orbit_schedule_refuses_inconsistent_phases():
    orbit = symmetric_allgather(from_expression("C(16,{1,6})"))
    with pytest.raises(ScheduleError, match="reduce_steps"):
        OrbitSchedule(orbit.topology, orbit.shard_chunks, orbit.sends, orbit.generators,
                      collective=Collective.ALLREDUCE)
    with pytest.raises(ScheduleError, match="collective"):
        OrbitSchedule(orbit.topology, orbit.shard_chunks, orbit.sends, orbit.generators,
                      collective="alltoall")
