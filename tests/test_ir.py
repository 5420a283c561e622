"""The rank-program IR (export/ir/) run on its own, without any runtime's format: a reference
interpreter executes every rank's ops over the IR's fields alone (kind, peer, lane, buffer
runs, dependencies), with unbounded FIFOs per connection (sending rank, receiving rank, lane)
and global vector clocks, and checks that

- every op can run (no deadlock), each receive takes a message of its own ``cnt``;
- every read is ordered after the write it reads, and every write after the reads and writes
  of the same place before it, on other threadblocks (the dependencies suffice; in place the
  input aliases the output as NCCL defines it);
- the result is the collective's, exactly: values are sets of (rank, piece) contributions and a
  reduction is a disjoint union (a dropped or doubled contribution fails).

Planted faults (a dropped dependency, a wrong offset) are caught, so the check is not vacuous."""
from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from topofinder.export.ir.bounds import layout_for
from topofinder.export.ir.deps import resolve
from topofinder.export.ir.lanes import assign_lanes
from topofinder.export.ir.lowering import lower
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule

ALLGATHER, REDUCE_SCATTER, ALLREDUCE = "allgather", "reduce-scatter", "allreduce"


def _memory(coll: str, u: int, n: int, p: int, table, inplace: bool, scratch: int):
    """Rank u's buffers as {(buffer name, offset): cell} (aliased in place) and the cells'
    initial values: a set of (rank, piece v·P + c) contributions, or None (not written)."""
    out_size = p if coll == REDUCE_SCATTER else n * p
    in_size = p if coll == ALLGATHER else n * p
    cell = {("output", o): ("o", o) for o in range(out_size)}
    cell.update({("scratch", o): ("s", o) for o in range(scratch)})
    for o in range(in_size):
        if not inplace:
            cell["input", o] = ("i", o)
        elif coll == ALLGATHER:
            cell["input", o] = ("o", u * p + o)         # the input is rank u's shard of out
        elif coll == REDUCE_SCATTER:
            cell["input", o] = ("i", o)
            if u * p <= o < (u + 1) * p:
                cell["output", o - u * p] = ("i", o)    # the output is rank u's input shard
        else:
            cell["input", o] = ("o", o)
    value = {c: None for c in cell.values()}
    for v in range(n):
        for c in range(p):
            if coll == ALLGATHER:
                if v == u:
                    value[cell["input", c]] = frozenset({(u, v * p + c)})
            else:
                value[cell["input", int(table[v, c])]] = frozenset({(u, v * p + c)})
    return cell, value


def run_ir(progs, coll: str, n: int, p: int, table, inplace: bool) -> dict:
    """Execute resolved programs (one instance, K = 1); returns {rank: {(buffer, offset):
    value}} of the final output. AssertionError on deadlock, a race or a bad receive."""
    tbs = [(prog.u, b) for prog in progs for b in range(len(prog.tb_peer))]
    gid = {x: i for i, x in enumerate(tbs)}
    ops = {x: progs[x[0]].ops(x[1]) for x in tbs}
    mems = {prog.u: _memory(coll, prog.u, n, p, table, inplace, prog.scratch) for prog in progs}
    last_write, reads = {}, {}                  # (rank, cell) → (gid, index); → [(gid, index)]
    clock = np.zeros((len(tbs), len(tbs)), np.int64)
    done_clock = {}                             # (gid, index) → clock after that op
    pc = [0] * len(tbs)
    fifo = {}

    def ordered(g: int, other) -> bool:
        return other[0] == g or clock[g, other[0]] > other[1]

    def touch(u, g, i, buf, off, cnt, write):
        cell, _ = mems[u]
        for o in range(off, off + cnt):
            key = (u, cell[buf, o])
            w = last_write.get(key)
            assert w is None or ordered(g, w), f"rank {u} op {i} of tb {g}: unordered after {w}"
            if write:
                assert all(ordered(g, r) for r in reads.get(key, [])), f"rank {u}: write race"
                last_write[key], reads[key] = (g, i), []
            else:
                reads.setdefault(key, []).append((g, i))

    def values(u, buf, off, cnt):
        cell, value = mems[u]
        got = [value[cell[buf, o]] for o in range(off, off + cnt)]
        assert all(x is not None for x in got), f"rank {u} reads an unwritten {buf} place"
        return got

    def store(u, buf, off, vals):
        cell, value = mems[u]
        for o, x in enumerate(vals):
            value[cell[buf, off + o]] = x

    progress = True
    while progress:
        progress = False
        for g, (u, b) in enumerate(tbs):
            prog, kind_peer = progs[u], progs[u].tb_peer[b]
            while pc[g] < len(ops[u, b]):
                op, i = ops[u, b][pc[g]], pc[g]
                if any(pc[gid[u, db]] <= di for db, di in op.deps):
                    break
                lane = prog.lane[b]
                if op.kind in ("recv", "recv_reduce"):
                    q = fifo.get((kind_peer[1], u, lane))
                    if not q:
                        break
                for db, di in op.deps:
                    np.maximum(clock[g], done_clock[gid[u, db], di], out=clock[g])
                if op.kind == "send":
                    touch(u, g, i, *op.src, op.cnt, False)
                    fifo.setdefault((u, kind_peer[1], lane), deque()).append(
                        (values(u, *op.src, op.cnt), clock[g].copy()))
                elif op.kind == "copy":
                    touch(u, g, i, *op.src, op.cnt, False)
                    vals = values(u, *op.src, op.cnt)
                    touch(u, g, i, *op.dst, op.cnt, True)
                    store(u, op.dst[0], op.dst[1], vals)
                else:
                    vals, sent = q.popleft()
                    np.maximum(clock[g], sent, out=clock[g])
                    assert len(vals) == op.cnt, f"rank {u} receives {len(vals)} for {op.cnt}"
                    if op.kind == "recv_reduce":
                        touch(u, g, i, *op.src, op.cnt, False)
                        mine = values(u, *op.src, op.cnt)
                        assert all(not (a & x) for a, x in zip(mine, vals)), "doubled"
                        vals = [a | x for a, x in zip(mine, vals)]
                    touch(u, g, i, *op.dst, op.cnt, True)
                    store(u, op.dst[0], op.dst[1], vals)
                clock[g, g] = i + 1
                done_clock[g, i] = clock[g].copy()
                pc[g] += 1
                progress = True
    stuck = [tbs[g] for g in range(len(tbs)) if pc[g] < len(ops[tbs[g]])]
    assert not stuck, f"deadlock: threadblocks {stuck[:4]} cannot progress"
    assert not any(fifo.values()), "messages left unreceived"
    out_size = p if coll == REDUCE_SCATTER else n * p
    return {u: {o: mems[u][1][mems[u][0]["output", o]] for o in range(out_size)} for u in mems}


def expected(coll: str, n: int, p: int, table) -> dict:
    """The collective's output by definition, per rank and output offset."""
    every = range(n)
    if coll == REDUCE_SCATTER:
        return {u: {c: frozenset((x, u * p + c) for x in every) for c in range(p)}
                for u in every}
    if coll == ALLGATHER:
        return {u: {int(table[v, c]): frozenset({(v, v * p + c)}) for v in every
                    for c in range(p)} for u in every}
    return {u: {int(table[v, c]): frozenset((x, v * p + c) for x in every) for v in every
                for c in range(p)} for u in every}


def _lowered(expr: str, coll: str, inplace: bool, stage: bool, lanes=None):
    s = collective_schedule(from_expression(expr), coll)
    layout = layout_for(s, 1, stage)
    progs = lower(s, 1, inplace, 71, stage=stage, layout=layout)
    resolve(progs)
    if lanes is not None:                       # (budget in ops per threadblock, ways)
        plan = assign_lanes(progs, (lanes[0],), lambda prog: np.ones(len(prog.arr)), lanes[1])[0]
        assert plan
        resolve(progs, plan)
    return s, progs, layout.table()


@pytest.mark.parametrize("expr,coll,inplace,stage,lanes", [
    ("Torus(3,3)", ALLGATHER, False, False, None),
    ("Torus(3,3)", ALLGATHER, True, True, (3, 2)),
    ("C(8,{1,3})", REDUCE_SCATTER, False, False, None),
    ("C(8,{1,3})", REDUCE_SCATTER, True, False, (2, 1)),
    ("L(K(3,3))", ALLREDUCE, False, True, None),
    ("L(K(3,3))", ALLREDUCE, True, False, (4, 1)),
    ("Hypercube(3)", ALLREDUCE, True, True, (5, 3)),
])
def test_the_ir_computes_its_collective_race_free(expr, coll, inplace, stage, lanes):
    """Lowered and resolved (on lanes: ``lanes`` = (budget in ops, ways to deal), when
    given), the IR runs to the collective's exact result with every access ordered by its
    dependencies and messages."""
    s, progs, table = _lowered(expr, coll, inplace, stage, lanes)
    if lanes is not None:
        assert max(max(prog.lane) for prog in progs) >= 1        # lanes were used
    got = run_ir(progs, coll, s.topology.n, s.shard_chunks, table, inplace)
    assert got == expected(coll, s.topology.n, s.shard_chunks, table)


def test_planted_faults_in_the_ir_are_caught():
    """A dropped dependency is a race; a receive moved one place over is a wrong result (or
    an unordered access)."""
    s, progs, table = _lowered("L(K(3,3))", ALLREDUCE, True, False)
    n, p = s.topology.n, s.shard_chunks
    prog = next(x for x in progs if x.deps[0].size)
    keep = prog.deps
    prog.deps = tuple(x[1:] for x in keep)
    with pytest.raises(AssertionError, match="unordered|race|reads an unwritten|deadlock"):
        run_ir(progs, ALLREDUCE, n, p, table, True)
    prog.deps = keep
    assert run_ir(progs, ALLREDUCE, n, p, table, True) == expected(ALLREDUCE, n, p, table)
    recv = np.flatnonzero(prog.arr[:, 1] == 1)[0]           # a plain receive
    prog.arr[recv, 5] = (prog.arr[recv, 5] + 1) % (n * p)
    with pytest.raises(AssertionError):
        got = run_ir(progs, ALLREDUCE, n, p, table, True)
        assert got == expected(ALLREDUCE, n, p, table)
