"""The MSCCL++ plan model (topofinder/export/mscclpp): upstream plans give their known verdicts,
planted faults are each caught by the check meant for them, limits refuse with the figure, and
hostile documents are refused in one line."""

from __future__ import annotations

import json

import pytest

from mscclpp_plans import (allpairs_allreduce, allpairs_reduce_scatter, barrier_copy, load_upstream,
                           mutated, needs_upstream, ops_of, ring_allgather, root_broadcast,
                           scratch_allgather, shared_wait_allgather)
from mscclpp_reference import Reference
from topofinder.errors import TopofinderError
from topofinder.export.mscclpp import check_plan
from topofinder.export.mscclpp.plan_limits import U32

CORRECT = ["allreduce.json", "allreduce_packet.json", "reduce.json", "reduce_pack.json",
           "reduce_pack_tbg.json", "transfer_pack.json", "transfer_pack_tbg.json",
           "allreduce_pipeline_modernized.json"]
RELAXED_ONLY = ["reduce_nvls.json", "reduce_nvls_pipeline.json"]


# ------------------------------------------------------------------ upstream verdicts (README)
@needs_upstream
@pytest.mark.parametrize("name", CORRECT)
def test_correct_upstream_plans_are_accepted_with_exact_results(name):
    report = check_plan(load_upstream(name))
    assert report.ok, report.first_error()
    assert report.launches == 2


@needs_upstream
@pytest.mark.parametrize("name", RELAXED_ONLY)
def test_nvls_plans_publish_by_relaxed_sync_only(name):
    """Decision (docs/formats.md): relaxed signal/wait order no data written in the kernel, so
    these race by default; taking relaxed ops as ordering data (README) makes them correct."""
    strict = check_plan(load_upstream(name))
    assert strict.races and not strict.result_errors and not strict.deadlock
    assert "glres" in strict.races[0]
    assert check_plan(load_upstream(name), relaxed_orders=True).ok


@needs_upstream
def test_reduce_tbg_race_is_the_one_the_readme_names():
    """Rank 0's threadblock 0 gets what rank 1's threadblock 1 wrote, synchronised only with
    rank 1's threadblock 0."""
    report = check_plan(load_upstream("reduce_tbg.json"))
    assert not report.ok and not report.deadlock
    first = report.races[0]
    assert "rank 1 tb 1" in first and "rank 0 tb 0" in first and "(get)" in first


@needs_upstream
def test_stale_pipeline_plan_is_refused_like_the_executor():
    doc = load_upstream("allreduce_pipeline.json")
    with pytest.raises(TopofinderError, match="output_chunks is 0"):
        check_plan(doc)
    # with the chunk count repaired, the switch channel's old 'buff' key is still refused
    fixed = mutated(doc, lambda p: [g.__setitem__("output_chunks", 4) for g in p["gpus"]])
    with pytest.raises(TopofinderError, match="missing 'buffer_type'"):
        check_plan(fixed)


@needs_upstream
def test_upstream_shape_figures():
    rep = check_plan(load_upstream("allreduce.json"))
    ops = max(len(tb["ops"]) for g in load_upstream("allreduce.json")["gpus"]
              for tb in g["threadblocks"])
    assert rep.max_ops_per_threadblock == ops == 7
    assert rep.max_threadblocks_per_rank == 8 and rep.ranks == 2
    # the largest chunk reference ends at chunk 16 of 16: 16 * floor(U32 / 16 / 16) * 16
    assert rep.max_message_bytes == U32 // 16 // 16 * 16 * 16
    # packets double offsets and the double scratch adds half the scratch (4 chunks x 2):
    # the worst packet end is 2 * 4 + 8 = 16 chunk sizes
    pkt = check_plan(load_upstream("allreduce_packet.json"))
    assert pkt.max_message_bytes == U32 // 16 // 16 * 16 * 4


# ------------------------------------------------------------------ hand-built plans
@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_hand_built_plans_are_correct(n):
    for plan in (allpairs_allreduce(n), ring_allgather(n)):
        report = check_plan(plan)
        assert report.ok, report.first_error()
    ring = check_plan(ring_allgather(n))
    assert ring.max_ops_per_threadblock == 3 + 4 * (n - 1) + 1
    assert ring.max_message_bytes == U32 // n // 16 * 16 * n


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_reduce_scatter_and_broadcast_in_and_out_of_place(n, inplace):
    assert check_plan(allpairs_reduce_scatter(n, inplace)).ok
    for root in range(n):
        rep = check_plan(root_broadcast(n, root, inplace), root=root)
        assert rep.ok, rep.first_error()
    # the model checks against the root it is told: another root's data is a wrong result
    wrong = check_plan(root_broadcast(n, 0, inplace), root=1)
    assert "of ranks {0}, expected launch 1 cell 0 of ranks {1}" in " ".join(wrong.result_errors)


def test_reduce_scatter_wrong_chunk_and_missing_handshake():
    wrong = mutated(allpairs_reduce_scatter(3),
                    lambda p: ops_of(p, 2)[3]["src_buff"][1].__setitem__("index", 1))
    assert check_plan(wrong).result_errors
    # without the release round a rank may end before a peer read its input: a race with
    # the next launch's input
    no_round = mutated(allpairs_reduce_scatter(3), lambda p: [ops_of(p, r).__delitem__(
        slice(4, 7)) for r in range(3)])
    assert check_plan(no_round).races


def test_three_launches_in_a_row():
    assert check_plan(ring_allgather(3), launches=3).ok


# ------------------------------------------------------------------ planted faults
def test_missing_wait_is_caught():
    # rank 1 drops its wait for rank 0's data at step 1: counts and ordering both break
    plan = mutated(ring_allgather(4), lambda p: ops_of(p, 1).pop(5))
    rep = check_plan(plan)
    assert any("3 signals but 2 waits" in e for e in rep.balance_errors)
    assert rep.races


def test_late_wait_is_a_race_not_a_count_error():
    def late(p):
        ops = ops_of(p, 1)
        ops.insert(9, ops.pop(5))        # wait after the next step's put
    rep = check_plan(mutated(ring_allgather(4), late))
    assert not rep.balance_errors and rep.races
    assert "write-read race on rank 1 out[cell 0]" in rep.races[0]


def test_wrong_chunk_index_is_caught():
    plan = mutated(ring_allgather(4),
                   lambda p: ops_of(p, 2)[3]["dst_buff"][0].__setitem__("index", 3))
    rep = check_plan(plan)
    assert rep.result_errors and "never written" in " ".join(rep.result_errors)


def test_deadlock_cycle_is_caught():
    def wait_first(p):
        for r in range(4):
            ops = ops_of(p, r)
            ops[0], ops[1] = ops[1], ops[0]
    rep = check_plan(mutated(ring_allgather(4), wait_first))
    assert rep.deadlock and "4 blocked" in rep.deadlock


def test_dropped_reduction_is_caught():
    rep = check_plan(mutated(allpairs_allreduce(3), lambda p: ops_of(p, 1)[3]["src_buff"].pop()))
    assert "of ranks {0,1}, expected launch 1 cell 1 of ranks {0,1,2}" in rep.result_errors[0]


def test_doubled_reduction_is_caught():
    def double(p):
        src = ops_of(p, 1)[3]["src_buff"]
        src.append(dict(src[1]))
    rep = check_plan(mutated(allpairs_allreduce(3), double))
    assert "ranks {0x2,1,2}" in rep.result_errors[0]


def test_unequal_signals_and_waits_across_launches():
    extra = {"name": "signal", "channel_ids": [0], "channel_type": "memory"}
    plan = mutated(allpairs_allreduce(3), lambda p: ops_of(p, 0).append(extra))
    one = check_plan(plan, launches=1)
    assert one.balance_errors and not one.races
    two = check_plan(plan)
    assert two.balance_errors and two.races     # launch 2's wait passes early


def test_missing_nop_between_data_and_signal_is_a_race():
    # the signal (thread 0) does not wait for the other threads' part of rres without a nop
    plan = mutated(allpairs_allreduce(3), lambda p: [ops_of(p, r).pop(4) for r in range(3)])
    assert check_plan(plan).races


def test_missing_flush_or_flush_without_dst_buff_races_with_the_next_launch():
    no_flush = mutated(ring_allgather(3), lambda p: [ops_of(p, r).pop() for r in range(3)])
    assert "[proxy put]" in check_plan(no_flush).races[0]
    dsl_flush = mutated(ring_allgather(3),
                        lambda p: [ops_of(p, r)[-1].pop("dst_buff") for r in range(3)])
    rep = check_plan(dsl_flush)
    assert rep.races and any("flushes nothing" in n for n in rep.notes)


def test_barrier_orders_blocks_of_a_rank():
    assert check_plan(barrier_copy()).ok
    assert "write-read race on rank 0 scr[cell 0]" in check_plan(barrier_copy(barrier=False)).races[0]
    one_side = mutated(barrier_copy(), lambda p: ops_of(p, 0, 1).pop(0))
    assert "barrier 0 (2 threadblocks)" in check_plan(one_side).deadlock
    with pytest.raises(TopofinderError, match="num_threadblocks 3 not in"):
        check_plan(barrier_copy(3))


def test_raw_remote_writes_ignore_the_double_scratch_half():
    assert check_plan(scratch_allgather(double=False)).ok
    rep = check_plan(scratch_allgather(double=True))
    assert rep.result_errors and all("after launch 2" in e for e in rep.result_errors)
    assert "never written" in rep.result_errors[0]


@needs_upstream
def test_mutated_upstream_plans_are_caught():
    ar = load_upstream("allreduce.json")
    names = [o["name"] for o in ops_of(ar, 0)]
    no_wait = mutated(ar, lambda p: ops_of(p, 0).pop(names.index("wait")))
    assert check_plan(no_wait).balance_errors
    wrong = mutated(ar, lambda p: ops_of(p, 0)[3]["src_buff"][1].__setitem__("index", 1))
    assert check_plan(wrong).result_errors
    pkt = load_upstream("allreduce_packet.json")
    dropped = mutated(pkt, lambda p: ops_of(p, 0)[1]["src_buff"].pop())
    assert "ranks {0}, expected" in check_plan(dropped).result_errors[0]
    tp = load_upstream("transfer_pack.json")
    moved = mutated(tp, lambda p: ops_of(p, 0)[0]["dst_buff"][0].__setitem__("index", 1))
    rep = check_plan(moved)     # rank 1 polls scratch 0 for a packet that now lands at 1
    assert rep.deadlock and "upkt" in rep.deadlock


# ------------------------------------------------------------------ limits with figures
def test_op_over_the_limit():
    plan = mutated(allpairs_allreduce(3), lambda p: ops_of(p, 0).extend([{"name": "nop"}] * 58))
    with pytest.raises(TopofinderError, match="65 ops .* MAX_OPERATION = 64"):
        check_plan(plan)


def test_pipeline_iterations_bound_the_message():
    """uint16_t iterations: chunks x chunk size / unit_size <= 65535."""
    pipe = {"name": "pipeline", "iter_context": {"unit_size": 1 << 10, "num_chunks": 2},
            "ops": [{"name": "nop"}]}
    plan = mutated(allpairs_allreduce(2), lambda p: ops_of(p, 0).insert(0, pipe))
    assert check_plan(plan).max_message_bytes == 65535 * (1 << 10) // 2 // 16 * 16 * 2


def test_pipeline_body_counts_toward_the_limit():
    body = [{"name": "nop"}] * 60
    pipe = {"name": "pipeline", "iter_context": {"unit_size": 1024, "num_chunks": 1}, "ops": body}
    plan = mutated(allpairs_allreduce(2), lambda p: ops_of(p, 0).insert(0, pipe))
    with pytest.raises(TopofinderError, match="68 ops"):
        check_plan(plan)


def test_too_many_channels_per_op():
    with pytest.raises(TopofinderError, match="9 channels, more than MAX_CHANNEL_PER_OPERATION = 8"):
        check_plan(allpairs_allreduce(10))


def test_too_many_channels_per_threadblock():
    def many(p):
        g = p["gpus"][0]
        g["channels"][0]["connected_to"] = [1] * 17
        g["threadblocks"][0]["channels"][0]["channel_ids"] = list(range(17))
    with pytest.raises(TopofinderError, match="17 memory channels, more than MAX_CHANNEL = 16"):
        check_plan(mutated(allpairs_allreduce(2), many))


def test_message_band_beyond_32_bits_is_refused_or_noted():
    plan = ring_allgather(4)
    bound = U32 // 4 // 16 * 16 * 4
    assert any(str(bound) in n for n in check_plan(plan).notes)
    plan["max_message_size"] = bound
    assert not check_plan(plan).notes
    plan["min_message_size"] = bound + 16
    with pytest.raises(TopofinderError, match=f"exceeds {bound} bytes"):
        check_plan(plan)


def test_threadblocks_must_all_be_resident():
    def more(p):
        tbs = p["gpus"][0]["threadblocks"]
        tbs += [{"id": i, "ops": [], "channels": []} for i in range(1, 5)]
    with pytest.raises(TopofinderError, match="5 threadblocks, more than the 4"):
        check_plan(mutated(allpairs_allreduce(2), more), max_threadblocks=4)


# ------------------------------------------------------------------ hostile documents
HOSTILE = [
    ("not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ("[" * 100000 + "]" * 100000, "not JSON"),
]


@pytest.mark.parametrize("text,match", HOSTILE)
def test_hostile_text(text, match):
    with pytest.raises(TopofinderError, match=match):
        check_plan(text)


@pytest.mark.parametrize("change,match", [
    (lambda p: p.pop("inplace"), "missing 'inplace'"),
    (lambda p: p.__setitem__("inplace", 1), "expected true/false"),
    (lambda p: p["gpus"][0].__setitem__("input_chunks", True), "expected an integer"),
    (lambda p: p["gpus"][0].__setitem__("input_chunks", -1), "outside"),
    (lambda p: p["gpus"][0].__setitem__("input_chunks", 2 ** 70), "outside"),
    (lambda p: p["gpus"][1].__setitem__("id", 0), "GPU rank does not match"),
    (lambda p: p["gpus"][0]["threadblocks"][0].__setitem__("id", 3), "not its position"),
    (lambda p: ops_of(p, 0)[3]["src_buff"][1].__setitem__("size", -4), "outside"),
    (lambda p: ops_of(p, 0)[3]["src_buff"][1].__setitem__("buffer_id", 7), "buffer_id 7"),
    (lambda p: ops_of(p, 0)[3].__setitem__("name", "glre"), "not one of"),
    (lambda p: ops_of(p, 0)[3]["src_buff"][0].__setitem__("index", 9), "out of range"),
    (lambda p: p["gpus"][0]["remote_buffers"][0].__setitem__("access_channel_types", ["port"]),
     "not accessible over memory"),
    (lambda p: p["gpus"][0]["channels"][0].__setitem__("connected_to", [5]), "outside"),
    (lambda p: p.__setitem__("collective", "reducescatter"), "do not fit"),
    (lambda p: [g.__setitem__("scratch_chunks", 2 ** 31) for g in p["gpus"]],
     "more than the model's"),
    (lambda p: ops_of(p, 0).insert(0, {"name": "pipeline", "ops": [],
                                       "iter_context": {"unit_size": 16, "num_chunks": 70000}}),
     "more than uint16_t holds"),
])
def test_hostile_fields_are_refused_in_one_line(change, match):
    plan = mutated(allpairs_allreduce(2), change)
    with pytest.raises(TopofinderError, match=match) as err:
        check_plan(json.dumps(plan))
    assert "\n" not in str(err.value)


def test_collective_argument_must_match():
    with pytest.raises(TopofinderError, match="expected 'allgather'"):
        check_plan(allpairs_allreduce(2), collective="allgather")
    assert check_plan(ring_allgather(2), collective="allgather").ok


def test_channel_waited_on_by_two_ordered_threads_is_accepted():
    """Rank 1's channel is waited on by two threadblocks; a device semaphore orders block 1's
    wait after block 0's, so the tickets are fixed and the plan is correct (the reference's
    exhaustive exploration agrees: one final state, the collective)."""
    report = check_plan(shared_wait_allgather(ordered=True))
    assert report.ok, report.first_error()
    ref = Reference(shared_wait_allgather(ordered=True))
    finals = ref.explore()
    assert finals and all(ref.correct(f) for f in finals)


def test_channel_waited_on_by_two_unordered_threads_is_refused():
    """Without the semaphore block 1 may take the handshake's ticket and copy the scratch
    before rank 0's data arrives: the model refuses the channel, and the reference finds a
    schedule with a wrong output."""
    report = check_plan(shared_wait_allgather(ordered=False))
    assert any("waited on by unordered threads" in e for e in report.balance_errors)
    ref = Reference(shared_wait_allgather(ordered=False))
    assert not all(ref.correct(f) for f in ref.explore())
