"""What the rank-program IR gives a one-sided runtime (export/ir/pairing.py, issue 37): every
send paired with the receive of its link and slot, the rounds of a step's local ops checked
against the piece-by-piece replay of what each op reads and writes, and the broadcast root's
programs."""

import numpy as np
import pytest

from topofinder import api
from topofinder.export.ir.lowering import lower
from topofinder.export.ir.pairing import (
    _local_pairs,
    _raw_pairs,
    local_rounds,
    overwrites_sent,
    pair_ops,
)
from topofinder.export.ir.program import KIND_CODE
from topofinder.export.ir.steps import broadcast_steps

CASES = [("C(8,{1,3})", "reduce-scatter", False), ("C(8,{1,3})", "allreduce", False),
         ("L(K(3,3))", "allreduce", False), ("UniRing(1,5)", "allgather", False),
         ("C(8,{1,3})", "allreduce", True), ("L(K(3,3))", "reduce-scatter", True)]


def _programs(expr, coll, inplace, k=1):
    return lower(api.schedule(expr, coll), k, inplace, 1 << 30)


def _pieces(prog, j, which):
    """The (buffer, offset) places op j of ``prog`` reads (which = 9) or writes (11)."""
    buf, off, cnt = (int(prog.arr[j, c]) for c in (which, which + 1, 6))
    return set() if buf < 0 else {(buf, off + i) for i in range(cnt)}


@pytest.mark.parametrize("expr,coll,inplace", CASES)
def test_sends_pair_with_the_receive_of_their_slot(expr, coll, inplace):
    """Each send has exactly one partner, a receive at its peer from its rank with the same
    step, run and count, and the pairing is an involution (checked op by op)."""
    progs = _programs(expr, coll, inplace)
    partner = pair_ops(progs)
    flat = [(p.u, row) for p in progs for row in p.arr.tolist()]
    assert (partner[partner[partner >= 0]] == np.flatnonzero(partner >= 0)).all()
    for i, (u, row) in enumerate(flat):
        kind = row[1]
        if kind == KIND_CODE["copy"]:
            assert partner[i] == -1
            continue
        v, other = flat[partner[i]]
        assert other[1] != KIND_CODE["send"] if kind == KIND_CODE["send"] \
            else other[1] == KIND_CODE["send"]
        assert row[0] >> 1 == v and other[0] >> 1 == u
        assert (row[6], row[7], row[8]) == (other[6], other[7], other[8])


@pytest.mark.parametrize("expr,coll,inplace", CASES)
def test_local_rounds_follow_every_earlier_writer(expr, coll, inplace):
    """Replaying each rank's local ops of a step in record order piece by piece: an op that
    reads a place an earlier local op of its step wrote (in place also: writes a place one
    read) is in a later round than it; and the round is the least such (one more than the
    largest it must follow)."""
    progs = _programs(expr, coll, inplace)
    rnd = local_rounds(progs)
    at = 0
    local = (KIND_CODE["recv_reduce"], KIND_CODE["copy"])
    for prog in progs:
        r = rnd[at:at + len(prog.arr)]
        at += len(prog.arr)
        wrote, read = {}, {}                 # place → ops of the current step
        step = None
        for j, row in enumerate(prog.arr.tolist()):
            if row[1] not in local:
                assert r[j] == 0
                continue
            if row[7] != step:
                step, wrote, read = row[7], {}, {}
            def cells(b, o, prog=prog):
                return int(prog.cells(np.array([b]), np.array([o]))[0])
            rd = {cells(*x) for x in _pieces(prog, j, 9)}
            wr = {cells(*x) for x in _pieces(prog, j, 11)}
            before = {i for x in rd for i in wrote.get(x, ())}
            if inplace:
                before |= {i for x in wr for i in read.get(x, set()) | wrote.get(x, set())}
            before.discard(j)
            assert r[j] == max((r[i] + 1 for i in before), default=0)
            for x in wr:
                wrote.setdefault(x, set()).add(j)
            for x in rd:
                read.setdefault(x, set()).add(j)


@pytest.mark.parametrize("expr,coll", [(e, c) for e, c, inplace in CASES if not inplace])
def test_run_pairs_equal_piece_conflicts(expr, coll):
    """Out of place, the pairs found on runs are those of the piece-level conflicts."""
    progs = _programs(expr, coll, False, k=2)
    first = np.cumsum([len(p.arr) for p in progs]) - [len(p.arr) for p in progs]
    pieces = set()
    for prog, f in zip(progs, first):
        cj, cw = _local_pairs(prog)
        pieces |= set(zip((cj + f).tolist(), (cw + f).tolist()))
    cj, cw = _raw_pairs(progs)
    assert set(zip(cj.tolist(), cw.tolist())) == pieces


def test_no_in_place_overwrite_of_what_was_sent():
    """The lowering never writes, in place, a place it sent from (partials are given up to
    scratch, final places are written once): none found on in-place programs."""
    for expr, coll, _ in CASES:
        for prog in _programs(expr, coll, True):
            assert overwrites_sent(prog) is None


@pytest.mark.parametrize("inplace", [False, True])
def test_broadcast_root_programs(inplace):
    """A broadcast's programs: only the root starts with data (out of place its one copy of
    P chunks), every other rank receives each of the P chunks once, into its output at the
    chunk's index."""
    topo = api.load("C(8,{1,3})")
    steps = broadcast_steps(api.schedule_oneroot(topo, "broadcast", root=3), topo)
    p = steps.shard_chunks
    progs = lower(steps, 1, inplace, 1 << 30, root=3)
    for prog in progs:
        kinds = prog.arr[:, 1]
        copies = prog.arr[kinds == KIND_CODE["copy"]]
        assert copies.shape[0] == (1 if prog.u == 3 and not inplace else 0)
        got = np.zeros(p, np.int64)
        for row in prog.arr[kinds == KIND_CODE["recv"]].tolist():
            assert row[4] == 1                              # the output
            got[row[5]:row[5] + row[6]] += 1
        assert (got == (0 if prog.u == 3 else 1)).all()
