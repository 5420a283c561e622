"""The rank-program IR's lowering passes one by one (export/ir/): layout, op bounds,
threadblock placement, the step's messages in layout order, consolidation into ops, staging,
receive places, and the dependencies the vector-clock rule chooses."""

import random
from bisect import bisect_right

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.export.ir.bounds import (
    _reduce_bound,
    _reduce_prep,
    instruction_bounds,
    layout_for,
    rank_need,
)
from topofinder.export.ir.deps import _choose_deps, resolve
from topofinder.export.ir.lanes import assign_lanes
from topofinder.export.ir.layout import allreduce_layouts, channel_shift, shard_layout
from topofinder.export.ir.lowering import (
    _breaks,
    _consolidate_sends,
    _fields,
    _Lowering,
    _receive_places,
    _run_starts,
    _step_messages,
    lower,
    place_threadblocks,
)
from topofinder.export.ir.program import RankProgram
from topofinder.families import uni_ring
from topofinder.families.build import parse
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule
from topofinder.model.schedule import StepSchedule


@pytest.mark.parametrize("expr", ["L^2(C(8,{1,2}))", "Torus(4,4)", "Pi(4,64)"])
@pytest.mark.parametrize("k", [1, 2])
def test_layouts_place_every_piece_of_every_channel_once(expr, k):
    """Channel j's chunk c of shard v sits at table[v, c] + shift(j): a bijection onto the
    N·k·P buffer places for every allreduce candidate and for the shard layout, which keeps
    shard v's pieces in [v·kP, (v+1)·kP)."""
    topo, p = parse(expr), 3
    n = topo.n
    for coll, lay in [("allgather", shard_layout(n, p, k))] + [
            ("allreduce", x) for x in allreduce_layouts(topo, p)]:
        tab = lay.table()
        places = [tab[v, c] + channel_shift(coll, n, p, j)
                  for j in range(k) for v in range(n) for c in range(p)]
        assert sorted(places) == list(range(n * k * p)), lay.name
        if coll == "allgather":
            assert all(v * k * p <= tab[v, c] + channel_shift(coll, n, p, j) < (v + 1) * k * p
                       for j in range(k) for v in range(n) for c in range(p))
        else:
            assert (lay.inverse(n * p)[tab.ravel()] == np.arange(n * p)).all()


def _walk_sets(topo, k: int, reverse: bool):
    """Per s = 1..k, per node u: the nodes with a walk of exactly s arcs to u (``reverse``:
    from u)."""
    a = np.zeros((topo.n, topo.n), np.int64)
    a[topo.src, topo.dst] = 1
    if reverse:
        a = a.T
    walk, sets = np.eye(topo.n, dtype=np.int64), []
    for _ in range(k):
        walk = np.minimum(walk @ a, 1)
        sets.append([frozenset(np.flatnonzero(walk[:, u]).tolist()) for u in range(topo.n)])
    return sets


@pytest.mark.parametrize("expr, k", [("L^2(C(8,{1,2}))", 2), ("L^3(C(5,{1,2}))", 3),
                                     ("L(K(4,4))", 1)])
def test_allreduce_layouts_make_walk_sets_intervals(expr, k):
    """On L^k(G), the nodes with a walk of exactly s ≤ k arcs to u are those whose walk ends
    where u's begins: one class of the s-th quotient by same out-neighbours, so in the
    out-quotient layout their slots are one interval (what an allgather step brings over an
    arc). In the layout by coarsest out- and in-class, then chunk, each chunk of the nodes
    that share both their first and their last node of G (a class of each chain) is one
    interval."""
    topo = parse(expr)
    p = 2
    quotient, out_in = allreduce_layouts(topo, p)[:2]
    slots = quotient.base // p
    assert sorted(slots.tolist()) == list(range(topo.n)) and (quotient.stride == 1).all()
    ends = _walk_sets(topo, k, reverse=False)
    for got in (x for level in ends for x in level):
        got = np.sort(slots[list(got)])
        assert got[-1] - got[0] + 1 == got.size
    tab = out_in.table()
    for a in set(ends[-1]):
        for b in set(_walk_sets(topo, k, reverse=True)[-1]):
            for c in range(p):
                at = np.sort(tab[sorted(a & b), c])
                assert at.size == 0 or at[-1] - at[0] + 1 == at.size


@pytest.mark.parametrize("expr", ["Torus(4,4)", "L(K(4,4))", "Hypercube(4)", "Pi(4,64)",
                                  "L^3(K(2,2))", "L^2(C(6,{1,2}))"])
@pytest.mark.parametrize("coll", ["reduce-scatter", "allreduce"])
def test_reduce_bound_never_exceeds_the_lowered_sends(expr, coll):
    """check_fits' reduce-phase bound, from the send rows alone, is at most the send
    instructions the lowering writes on each link in that phase, and above one per
    (link, step) somewhere (it sees the layout's ranges); with the allgather phase (direct,
    no staging) the whole bound is at most every send the direct lowering writes, in the
    layout the writer chose (L^3(K(2,2)): the one by coarse classes, then chunk)."""
    s = collective_schedule(from_expression(expr), coll)
    n = s.topology.n
    until = s.num_steps if coll == "reduce-scatter" else s.reduce_steps
    table = layout_for(s).table()
    bound = _reduce_bound(_reduce_prep(s, until), table, n)
    lowered, every = np.zeros(n * n, np.int64), np.zeros(n * n, np.int64)
    for prog in lower(s, 1, False, 71):
        resolve([prog])
        for tb, (kind, w) in enumerate(prog.tb_peer):
            if kind == "send":
                ins = prog.ops(tb)
                lowered[prog.u * n + w] += sum(1 for x in ins if x[4] <= until)
                every[prog.u * n + w] += len(ins)
    assert (bound <= lowered).all()
    rows = s.sends[s.sends[:, 0] <= until]
    messages = np.unique((rows[:, 4] * n + rows[:, 5]) * (until + 1) + rows[:, 0]).size
    assert bound.sum() > messages
    direct, _ = instruction_bounds(s, table, False)
    assert (direct <= every).all()
    assert (rank_need(direct, None, n, False) <= every.reshape(n, n).sum(0) +
            every.reshape(n, n).sum(1)).all()


def test_threadblock_placement_follows_the_links_the_schedule_uses():
    """One send threadblock per out-neighbour and one receive threadblock per in-neighbour
    that the schedule's rows use, plus one local threadblock."""
    s = collective_schedule(from_expression("C(8,{1,2})"), "allgather")
    progs = place_threadblocks(s, inplace=False, k=1)
    links = {(u, w) for u, w in s.sends[:, 4:6].tolist()}
    for prog in progs:
        resolve([prog])
        assert {w for kind, w in prog.tb_peer if kind == "send"} == \
            {w for u, w in links if u == prog.u}
        assert {u for kind, u in prog.tb_peer if kind == "recv"} == \
            {u for u, w in links if w == prog.u}
        assert [kind for kind, _ in prog.tb_peer].count("local") == 1
        assert len(prog.tb_peer) == len(prog.out_peers) + len(prog.in_peers) + 1


def _code(place):
    """A place (buf, off) as the lowering's code 4·off + buffer code; None as −1."""
    return -1 if place is None else 4 * place[1] + "ios".index(place[0])


def _run_lengths(items, max_cnt, fields):
    """Run lengths of the lowering's array split (_breaks, _run_starts) of ``items``; a
    kind ("r", "rrc") as a negative code, places as codes."""
    codes = [np.array([-2 - ("r", "rrc").index(it[f]) if isinstance(it[f], str)
                       else _code(it[f]) for it in items], np.int64) for f in fields]
    head = np.flatnonzero(_run_starts(_breaks(codes, np.zeros(len(items), np.int64)),
                                      max_cnt))
    return np.diff(np.r_[head, len(items)]).tolist()


def test_runs_merge_contiguous_places_up_to_the_count_limit():
    items = [(("o", 0),), (("o", 1),), (("o", 2),), (("s", 3),), (("o", 4),), (("o", 5),)]
    assert _run_lengths(items, 71, (0,)) == [3, 1, 2]
    assert _run_lengths(items, 2, (0,)) == [2, 1, 1, 2]


def test_step_messages_are_in_buffer_order_and_reduce_senders_give_up_partials():
    """A reduce-phase step: rank 0 sends shards 2 and 1 to rank 1 (rows out of order); the
    message lists them by their place at rank 0, and rank 0 no longer holds them."""
    topo = uni_ring(1, 3)
    rows = np.array([[1, 2, 0, 1, 0, 1], [1, 1, 0, 1, 0, 1]], np.int64)
    sched = StepSchedule(topo, 1, rows, collective="reduce-scatter")
    st = _Lowering(sched, 1, False, 71, False)
    st.loc[0] = 4 * st.table[:, 0]
    msg = _step_messages(st, rows, 1, reducing=True)
    assert [msg[x].tolist() for x in ("u", "w", "pc")] == [[0, 0], [1, 1], [1, 2]]
    assert msg["src"].tolist() == [_code(("i", 1)), _code(("i", 2))]
    assert np.flatnonzero(st.loc[0] >= 0).tolist() == [0]


def _one_message(stage: bool, srcs: list, dsts: list):
    """Rank 0 sends pieces at ``srcs`` to rank 1, landing at ``dsts`` (allgather phase),
    through the consolidation pass; returns rank 0's resolved program."""
    topo = uni_ring(1, 3)
    sched = StepSchedule(topo, 1, np.array([[1, 0, 0, 1, 0, 1]]), collective="allgather")
    st = _Lowering(sched, 1, False, 71, stage)
    m = len(srcs)
    msg = {"u": np.zeros(m, np.int64), "w": np.ones(m, np.int64), "pc": np.arange(m),
           "src": np.array([_code(x) for x in srcs]), "dst": np.array([_code(x) for x in dsts]),
           "kind": np.ones(m, np.int64), "cur": np.full(m, -1)}
    _consolidate_sends(st, msg, 1, reducing=False)
    prog = st.programs()[0]
    resolve([prog])
    return prog


def test_consolidation_sends_one_instruction_per_contiguous_run():
    prog = _one_message(False, [("o", 0), ("o", 1), ("o", 5)], [("o", 0), ("o", 1), ("o", 2)])
    sends = prog.ops(prog.tb_peer.index(("send", 1)))
    assert [(kind, src, cnt) for kind, src, _, cnt, _, _ in sends] == [
        ("send", ("output", 0), 2), ("send", ("output", 5), 1)]


def test_staging_packs_several_ranges_into_one_scratch_range():
    """Two source ranges of one message: two copies into fresh scratch in the step's local
    threadblock, then the send reads the scratch range; a single range is sent as it is."""
    prog = _one_message(True, [("o", 0), ("o", 1), ("o", 7)], [("o", 0), ("o", 1), ("o", 2)])
    assert prog.scratch == 3
    stage = [b for b, (kind, _) in enumerate(prog.tb_peer) if kind == "local"][1]
    copies = prog.ops(stage)
    assert [(c[0], c[1], c[2], c[3]) for c in copies] == [
        ("copy", ("output", 0), ("scratch", 0), 2), ("copy", ("output", 7), ("scratch", 2), 1)]
    sends = prog.ops(prog.tb_peer.index(("send", 1)))
    assert [(c[0], c[1], c[3]) for c in sends] == [("send", ("scratch", 0), 3)]
    prog = _one_message(True, [("o", 0), ("o", 1)], [("o", 0), ("o", 1)])
    sends = prog.ops(prog.tb_peer.index(("send", 1)))
    assert prog.scratch == 0 and [(c[1], c[3]) for c in sends] == [(("output", 0), 2)]


def test_receive_places_chain_partials_of_one_piece_arriving_together():
    """Reduce phase, rank 2 gets its own chunk from ranks 0 and 1 in one step (two sends of
    it in all): the first lands in fresh scratch reducing with rank 2's input, the second
    reduces with that scratch partial into the output; rank 2 then holds it there."""
    rows = np.array([[1, 2, 0, 1, 0, 2], [1, 2, 0, 1, 1, 2]], np.int64)
    sched = StepSchedule(uni_ring(1, 3), 1, rows, collective="reduce-scatter")
    st = _Lowering(sched, 1, False, 71, False)
    st.loc[:] = 4 * st.table.ravel()[None, :]
    st.remaining[2, 0] = 2
    msg = _step_messages(st, rows, 1, reducing=True)
    _receive_places(st, msg, reducing=True)
    assert msg["kind"].tolist() == [2, 2]
    assert msg["cur"].tolist() == [_code(("i", 2)), _code(("s", 0))]
    assert msg["dst"].tolist() == [_code(("s", 0)), _code(("o", 0))]
    assert st.loc[2, 2] == _code(("o", 0)) and st.remaining[2, 0] == 0


def _greedy_runs(items, max_cnt, fields):
    """The run split spelled out one item at a time (the array split's second method)."""
    def follows(a, b):
        for f in fields:
            x, y = a[f], b[f]
            if isinstance(x, tuple) and isinstance(y, tuple):
                if (x[0], x[1] + 1) != y:
                    return False
            elif x != y:
                return False
        return True
    out = []
    for it in items:
        if out and len(out[-1]) < max_cnt and follows(out[-1][-1], it):
            out[-1].append(it)
        else:
            out.append([it])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_runs_equal_the_item_by_item_greedy_split(seed):
    """Random messages (places that mostly advance, kinds, partials or none): the array
    run split equals the greedy scan for every field set and count limit."""
    rng = random.Random(seed)
    items, at = [], {f: ("o", 0) for f in (0, 2, 3)}
    for _ in range(rng.randrange(1, 120)):
        it = []
        for f in range(4):
            if f == 1:
                it.append(rng.choice(["r", "r", "rrc"]))
                continue
            buf, off = at[f]
            at[f] = (rng.choice("ios"), rng.randrange(50)) if rng.random() < 0.15 \
                else (buf, off + 1)
            it.append(None if f == 2 and rng.random() < 0.2 else at[f])
        items.append(tuple(it))
    for fields in [(0,), (3,), (0, 2), (0, 1, 2, 3)]:
        for max_cnt in (1, 2, 5, 71):
            assert _run_lengths(items, max_cnt, fields) == \
                [len(r) for r in _greedy_runs(items, max_cnt, fields)]


def test_an_out_of_place_write_to_a_used_place_is_refused():
    """Out of place the lowering tracks no readers because every write goes to a fresh
    place; a write to a place already written, or to the input, is an internal error."""
    for place in (None, ("o", 4), ("i", 0)):
        prog = RankProgram(0, [1], [1], False, "allgather", 1)
        rows = [_fields(1, 3, 1, 13, 13, 2, 1, 0, -1, 13),       # receive from 1 into o3..o4
                _fields(1, 2, 0, 17, 17, 1, 2, 0, 17, -1)]       # send o4 to 1
        prog.load(np.concatenate(rows), 0)
        if place is None:
            resolve([prog])
            send, recv = prog.tb_peer.index(("send", 1)), prog.tb_peer.index(("recv", 1))
            assert prog.ops(send)[0].deps == ((recv, 0),)
            continue
        rows.append(_fields(1, -1, 3, 2, _code(place), 1, 3, 0, -1, _code(place)))
        prog.load(np.concatenate(rows), 1)
        with pytest.raises(TopofinderError, match="internal error"):
            resolve([prog])


def _join_clocks(ntb: int, tbs: list, idxs: list, rows: list, cands: list):
    """The reference vector-clock loop (the writer's rule before _choose_deps): per
    instruction with candidates in record order (``rows[g]``, index ``idxs[g]`` on
    threadblock ``tbs[g]``, candidate (threadblock, index) pairs ``cands[g]``), the
    candidates its sparse clock {threadblock: instructions known done} does not imply yet,
    tried by decreasing clock sum, each joined into the clock when chosen."""
    kpos, kval, ksum = ([[] for _ in range(ntb)] for _ in range(3))
    latest, out = [None] * ntb, []

    def clock_sum(bi):
        q = bisect_right(kpos[bi[0]], bi[1]) - 1
        return -((ksum[bi[0]][q] if q >= 0 else 0) + bi[1] + 1)

    for a, x, j, pairs in zip(tbs, idxs, rows, cands):
        cur = dict(latest[a] or {})
        cur[a] = x
        chosen = False
        for b, i in sorted(pairs, key=clock_sum):
            if cur.get(b, 0) > i:
                continue
            chosen = True
            out.append((j, b, i))
            q = bisect_right(kpos[b], i) - 1
            for c, v in (kval[b][q].items() if q >= 0 else ()):
                cur[c] = max(cur.get(c, 0), v)
            cur[b] = max(cur.get(b, 0), i + 1)
        if chosen:
            cur[a] = x + 1
            latest[a] = cur
            kpos[a].append(x)
            kval[a].append(cur)
            ksum[a].append(sum(cur.values()) - x - 1)
    deps = np.array(out, np.int64).reshape(-1, 3)
    return deps[:, 0], deps[:, 1], deps[:, 2]


@pytest.mark.parametrize("expr, coll, inplace, stage, budget", [
    ("L(K(4,4))", "allgather", False, False, None),
    ("Hypercube(4)", "allgather", False, False, 6),
    ("L^2(K(3,3))", "allgather", False, True, None),
    ("L^2(K(3,3))", "allgather", True, True, 5),
    ("C(8,{1,2})", "reduce-scatter", False, None, None),
    ("Torus(4,4)", "reduce-scatter", True, None, 4),
    ("L(K(4,4))", "allreduce", False, False, 6),
    ("L^2(C(6,{1,2}))", "allreduce", True, True, None),
    ("Pi(4,64)", "allreduce", False, True, 8)])
def test_chosen_dependencies_equal_the_vector_clock_loop(expr, coll, inplace, stage, budget):
    """_choose_deps (clocks of waited threadblocks, then prefix maxima) chooses the same
    dependencies in the same order as the reference vector-clock loop, on one lane and on
    lanes, in and out of place, staged, and through allreduce's reduce phase (where the
    receiving threadblocks wait for each other); run on several ranks side by side
    (resolve's batches) or on one."""
    s = collective_schedule(from_expression(expr), coll)
    progs = lower(s, 1, inplace, 71, stage=stage)
    resolve(progs, batch=3)
    lanes = assign_lanes(progs, (budget,), lambda prog: np.maximum(1, prog.dep_count))[0] \
        if budget else None
    resolve(progs, lanes, batch=5)
    inner = 0
    for prog in progs:
        tb, idx = prog.tb_of, prog.order.argsort()
        idx = idx - prog.tb_start[tb]
        cj, cb, ci = prog._candidates(tb, idx)
        heads = np.flatnonzero(np.r_[True, cj[1:] != cj[:-1]])
        pairs = list(zip(cb.tolist(), ci.tolist()))
        bounds = heads.tolist() + [len(pairs)]
        loop = _join_clocks(len(prog.tb_peer), tb[cj[heads]].tolist(), idx[cj[heads]].tolist(),
                            cj[heads].tolist(),
                            [pairs[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
        inner += bool(np.isin(cb, tb[cj]).any())
        assert len(loop[0]) and all((x == y).all() for x, y in zip(prog.deps, loop))
        alone = _choose_deps(tb, idx, cj, cb, ci, np.zeros(len(prog.tb_peer), np.int64))
        assert all((x == y).all() for x, y in zip(alone, loop))
    assert inner == (0 if coll == "allgather" and not stage else len(progs))
