"""Cross-check: the package's MSCCL++ model against the independent reference interpreter
(tests/mscclpp_reference.py: explicit state, atomic ops, asynchronous proxies, random and
exhaustive schedules). They must agree on every plan the reference can run."""

from __future__ import annotations

import pytest

from mscclpp_plans import (allpairs_allreduce, allpairs_reduce_scatter, doubling_allgather,
                           load_upstream, mutated, needs_upstream, ops_of, ring_allgather,
                           root_broadcast, scratch_allgather)
from mscclpp_reference import Reference
from topofinder.export.mscclpp import check_plan

RUNNABLE = ["allreduce.json", "allreduce_packet.json", "reduce.json", "reduce_pack.json",
            "reduce_pack_tbg.json", "transfer_pack.json", "transfer_pack_tbg.json"]


def reference_verdict(doc, seeds=40, root=0) -> bool:
    """True when every sampled schedule (eager and lazy proxies) gives the collective."""
    ref = Reference(doc, root=root)
    return all(ref.correct(ref.run_random(s, lazy_proxy=0.9 if s % 2 else 0.0))
               for s in range(seeds))


@needs_upstream
@pytest.mark.parametrize("name", RUNNABLE)
def test_both_accept_the_correct_upstream_plans(name):
    doc = load_upstream(name)
    assert check_plan(doc).ok
    assert reference_verdict(doc)


@needs_upstream
def test_both_reject_reduce_tbg():
    doc = load_upstream("reduce_tbg.json")
    assert check_plan(doc).races
    assert not reference_verdict(doc, seeds=200)


@pytest.mark.parametrize("build,n", [(allpairs_allreduce, 2), (allpairs_allreduce, 3),
                                     (ring_allgather, 3), (ring_allgather, 4),
                                     (doubling_allgather, 4), (doubling_allgather, 8)])
def test_both_accept_the_hand_built_plans(build, n):
    doc = build(n)
    assert check_plan(doc).ok
    assert reference_verdict(doc)


@pytest.mark.parametrize("inplace", [False, True])
def test_both_accept_reduce_scatter_and_broadcast(inplace):
    rs = allpairs_reduce_scatter(3, inplace)
    assert check_plan(rs).ok and reference_verdict(rs)
    bc = root_broadcast(3, 2, inplace)
    assert check_plan(bc, root=2).ok and reference_verdict(bc, root=2)
    assert not check_plan(bc, root=0).ok and not reference_verdict(bc, seeds=2, root=0)


def test_both_see_raw_remote_writes_miss_the_double_scratch_half():
    assert check_plan(scratch_allgather(False)).ok and reference_verdict(scratch_allgather(False))
    assert not check_plan(scratch_allgather(True)).ok
    assert not reference_verdict(scratch_allgather(True), seeds=4)


@needs_upstream
@pytest.mark.parametrize("name", ["transfer_pack.json", "reduce_pack.json"])
def test_exhaustive_exploration_of_small_upstream_plans(name):
    ref = Reference(load_upstream(name))
    finals = ref.explore()
    assert finals and all(ref.correct(f) for f in finals)


@pytest.mark.parametrize("doc", [allpairs_allreduce(2), ring_allgather(2)])
def test_exhaustive_exploration_of_small_hand_built_plans(doc):
    ref = Reference(doc)
    finals = ref.explore()
    assert finals and all(ref.correct(f) for f in finals)


def _late(p):
    ops = ops_of(p, 1)
    ops.insert(9, ops.pop(5))


def _wait_first(p):
    for r in range(4):
        ops = ops_of(p, r)
        ops[0], ops[1] = ops[1], ops[0]


def _doubled(p):
    src = ops_of(p, 1)[3]["src_buff"]
    src.append(dict(src[1]))


FAULTS = {
    "late wait": (ring_allgather, _late),
    "missing wait": (ring_allgather, lambda p: ops_of(p, 1).pop(5)),
    "wrong chunk": (ring_allgather,
                    lambda p: ops_of(p, 2)[3]["dst_buff"][0].__setitem__("index", 3)),
    "deadlock cycle": (ring_allgather, _wait_first),
    "missing flush": (ring_allgather, lambda p: [ops_of(p, r).pop() for r in range(4)]),
    "dropped reduction": (allpairs_allreduce, lambda p: ops_of(p, 1)[3]["src_buff"].pop()),
    "doubled reduction": (allpairs_allreduce, _doubled),
    "extra signal": (allpairs_allreduce, lambda p: ops_of(p, 0).append(
        {"name": "signal", "channel_ids": [0], "channel_type": "memory"})),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_both_catch_each_planted_fault(fault):
    build, change = FAULTS[fault]
    doc = mutated(build(4 if build is ring_allgather else 3), change)
    assert not check_plan(doc).ok
    assert not reference_verdict(doc, seeds=100)


WRITER_CASES = [("C(8,{1,3})", "allgather", False), ("C(8,{1,3})", "reduce-scatter", True),
                ("Torus(3,3)", "allreduce", False), ("Torus(3,3)", "allgather", True)]


@pytest.mark.parametrize("expr,coll,inplace", WRITER_CASES)
def test_model_and_reference_agree_on_the_writers_plans(expr, coll, inplace):
    """Plans of the project's MSCCL++ writer (when present): whatever the reference finds
    wrong in some schedule, the model rejects; what the model accepts, every sampled schedule
    of the reference computes correctly."""
    import json
    writer = pytest.importorskip("topofinder.export.mscclpp.plan_writer")
    from topofinder.finder.recipe import from_expression
    from topofinder.finder.verify import collective_schedule
    schedule = collective_schedule(from_expression(expr), coll)
    doc = json.loads(writer.to_mscclpp_plan(schedule, inplace=inplace))
    model_ok = check_plan(doc).ok
    reference_ok = reference_verdict(doc, seeds=8)
    assert reference_ok or not model_ok, "a schedule of the reference fails a plan the model accepts"
