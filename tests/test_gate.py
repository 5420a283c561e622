"""run_parallel's gate (items skipped or held back on what has finished), and the search's use
of it: predicted points a verified one outdoes are not verified, and what is kept does not
depend on the order verifications end in."""

from __future__ import annotations

import time

from topofinder.api import search
from topofinder.compute import parallel
from topofinder.compute.parallel import RUN, SKIP, WAIT, run_parallel
from topofinder.finder import frontier, priced
from topofinder.finder.verify import verify_candidate
from topofinder.workload.cost import Workload
from topofinder.workload.rank import _pareto_points, _point


def _timed(i: int) -> tuple[int, float, float]:
    start = time.monotonic()
    time.sleep(0.05)
    return i, start, time.monotonic()


def _multiples_skipped(i, finished, running):
    """Skip i when a finished item divides it (a sieve: whether 4 runs depends on 2)."""
    return SKIP if any(i % r[0] == 0 for r in finished.values() if r is not None) else RUN


def test_a_gate_skips_on_finished_results_alone():
    for jobs in (1, 2):
        out = run_parallel(_timed, range(2, 16), jobs=jobs, share=True,
                           gate=lambda i, f, r: _multiples_skipped(i + 2, f, r))
        ran = {r[0] for r in out if r is not None}
        # a multiple is skipped only after a divisor finished, so every prime runs; a
        # composite may run when its divisors were still running (never a wrong result)
        assert {2, 3, 5, 7, 11, 13} <= ran
        assert all(r is None or r[0] == i for i, r in enumerate(out, start=2))
        if jobs == 1:                                  # in order: a perfect sieve
            assert ran == {2, 3, 5, 7, 11, 13}


def test_wait_holds_an_item_until_the_running_one_ends():
    def gate(i, finished, running):
        return WAIT if i == 1 and 0 in running else RUN
    out = run_parallel(_timed, range(3), jobs=2, share=True, gate=gate)
    assert out[1][1] >= out[0][2]                       # item 1 started after item 0 ended


def test_wait_with_nothing_running_runs():
    assert run_parallel(_timed, range(2), jobs=1,
                        gate=lambda i, f, r: WAIT)[1][0] == 1
    batch = parallel.Batch(_timed, [(0,), (1,)], jobs=1, shared=True,
                           gate=lambda i, f, r: WAIT)
    assert [r[0] for r in batch.results()] == [0, 1]


def test_outdone_points_are_exactly_those_a_full_verification_drops():
    """N = 1024, d = 4: the predicted frontier has six points; verifying all six, the two
    of T_L 11 and 19 are worse than L^2(Aff(8,3,{1,3}))^2 (10, 1023/1024) at their own
    lower bounds, and the gated verification leaves exactly them out — serially and in
    parallel; the ranked search is the same as over all six."""
    n, d = 1024, 4
    memos: dict = {}
    predicted, _ = frontier.verifiable_frontier(
        frontier.final_candidates(n, d), frontier.final_candidates(n, d, whole=True),
        memos=memos)
    # while a point runs, the gate holds back (in this process) only points it may outdo:
    # L^3(C(16,{1,6}))'s allreduce (12, 261/128) is above every bound of 2·1023/1024, while
    # L^2(Aff(8,3,{1,3}))^2's (20, 1023/512) meets L(Aff x Aff)'s
    at = {c.expr: i for i, c in enumerate(predicted)}
    gate = frontier._Outdone(predicted, memos["allreduce"]).gate
    assert gate(at["L^2(Aff(64,17,{7,21,29,31}))"], {}, {at["L^3(C(16,{1,6}))"]}) == RUN
    assert gate(at["L(Aff(16,7,{5,11}) x Aff(16,7,{5,11}))"], {},
                {at["L^2(Aff(8,3,{1,3}))^2"]}) == WAIT
    everything = [verify_candidate(c, False, None) for c in predicted]
    bounds = [priced.lower_bounds(c) for c in predicted]

    def outdone(i):
        ag, ar = bounds[i]["allgather"], bounds[i]["allreduce"]
        return any(v.T_L <= ag[0] and v.tau <= ag[1] and v.allreduce_T_L <= ar[0]
                   and v.allreduce_tau <= ar[1]
                   and (v.T_L, v.tau, v.allreduce_T_L, v.allreduce_tau) != (*ag, *ar)
                   for v in everything)
    left_out = {predicted[i].expr for i in range(len(predicted)) if outdone(i)}
    assert left_out == {"L(Aff(16,7,{5,11}) x Aff(16,7,{5,11}))",
                        "Aff(16,7,{5,11}) x UniRing(1,8) x UniRing(1,8)"}
    for jobs in (1, 2):
        kept, _ = frontier.verified_frontier(n, d, False, False, prune=True, jobs=jobs,
                                             use_cache=False)
        assert {c.expr for c, _ in kept} == {c.expr for c in predicted} - left_out
    workload = Workload()
    over_all = _pareto_points([_point(c, v, workload) for c, v in zip(predicted, everything)])
    assert [p.expr for p in search(n, d, use_cache=False).frontier] == [
        p.expr for p in over_all]


def _slow_unless_first(i: int) -> int:
    time.sleep(0 if i == 0 else 60)
    return i


def test_running_items_the_gate_now_skips_are_given_up():
    """Both items run on workers; once item 0 has finished, the gate skips item 1, still
    running: the batch does not wait for it, and its result is None."""
    def gate(i, finished, running):
        return SKIP if i == 1 and 0 in finished else RUN
    start = time.monotonic()
    batch = parallel.Batch(_slow_unless_first, [(0,), (1,)], jobs=2, shared=False, gate=gate)
    try:
        assert batch.results() == [0, None]
        assert time.monotonic() - start < 50           # given up, not waited for
    finally:
        parallel.stop_workers()                        # the sleeping worker too


def test_shared_batches_take_closures_on_any_pool():
    """A shared batch's workers may be forks served by the standard library's pool, which
    pickles functions by reference only: closures and lambdas still run there."""
    k = 7
    assert run_parallel(lambda x: x * k, range(6), jobs=2, share=True) == [0, 7, 14, 21, 28, 35]
    parallel.stop_workers()


def test_an_all_to_all_share_verifies_what_allgather_and_allreduce_outdo():
    """With an all-to-all share the objective's frontier weighs the all-to-all too: at N =
    1024, d = 4, 64 MB, share 0.3, L(Aff(16,7,{5,11}) x Aff(16,7,{5,11})) — outdone on
    allgather and allreduce by L^2(Aff(8,3,{1,3}))^2 — has the better all-to-all and stays
    on that frontier, so nothing is pruned there."""
    workload = Workload.from_strings(size="64MB", alltoall_share=0.3)
    kept = {p.expr: p.frontiers for p in search(1024, 4, workload, use_cache=False).frontier}
    assert kept["L(Aff(16,7,{5,11}) x Aff(16,7,{5,11}))"] == ("objective",)
