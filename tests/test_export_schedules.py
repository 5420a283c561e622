"""Schedule export: JSON, MSCCL-style XML and .npz re-import and replay valid; the XML's sends
equal the JSON's, and an independent interpreter of the XML program computes the collective."""

import random
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict, deque
from fractions import Fraction

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.export.npz import load_npz, save_npz
from topofinder.export.ir.steps import trees_as_steps
from topofinder.export.msccl.reimport import parse_msccl_xml, schedule_from_xml
from topofinder.export.msccl.writer import to_msccl_xml
from topofinder.families import bi_ring, complete, hypercube, uni_ring
from topofinder.model.schedule import StepSchedule, allreduce, reduce_scatter, validate
from topofinder.model.tree_schedule import Tree, TreeSchedule
from topofinder.model.tree_schedule import validate as validate_trees


def ring_allgather(n):
    """UniRing(1,n): at step t node u forwards shard u−t+1 to u+1 (N−1 steps)."""
    rows = [(t, (u - t + 1) % n, 0, 1, u, (u + 1) % n) for t in range(1, n) for u in range(n)]
    return StepSchedule(uni_ring(1, n), 1, rows, method="ring")


def biring_bfb(n):
    """BiRing(2,n), n even: BFB (paper 001 App. F.1) — every shard goes both ways for
    n/2 − 1 steps; the farthest node takes chunk 0 from one side and chunk 1 from the other."""
    rows = []
    for u in range(n):
        for t in range(1, n // 2):
            rows.append((t, u, 0, 2, (u + t - 1) % n, (u + t) % n))
            rows.append((t, u, 0, 2, (u - t + 1) % n, (u - t) % n))
        rows.append((n // 2, u, 0, 1, (u + n // 2 - 1) % n, (u + n // 2) % n))
        rows.append((n // 2, u, 1, 2, (u - n // 2 + 1) % n, (u - n // 2) % n))
    return StepSchedule(bi_ring(2, n), 2, rows, method="bfb")


def hypercube_doubling(k):
    """Hypercube(k): recursive doubling — at step t every node sends all 2^(t−1) shards it
    holds across dimension t−1."""
    n = 1 << k
    rows = [(t, v, 0, 1, u, u ^ (1 << (t - 1)))
            for t in range(1, k + 1) for u in range(n)
            for v in range(n) if (v ^ u) < (1 << (t - 1))]
    return StepSchedule(hypercube(k), 1, rows, method="doubling")


def complete_direct(m):
    g = complete(m)
    return StepSchedule(g, 1, [(1, u, 0, 1, u, w) for u, w in zip(g.src, g.dst)])


ALLGATHERS = {"ring6": lambda: ring_allgather(6), "biring8": lambda: biring_bfb(8),
              "cube3": lambda: hypercube_doubling(3), "K5": lambda: complete_direct(5)}


def collectives(name):
    ag = ALLGATHERS[name]()
    rs = reduce_scatter(ag)
    return {"allgather": ag, "reduce-scatter": rs, "allreduce": allreduce(rs, ag)}


def test_reference_schedules_meet_theory():
    """Hand schedules behave as theory says (sanity for the fixtures): ring T_L = N−1 and
    BFB bi-ring T_L = N/2 (App. F.1) are BW-optimal, τ = (N−1)/N; recursive doubling uses one
    of the d links per step, τ = d·(N−1)/N."""
    for name, steps, links in [("ring6", 5, 1), ("biring8", 4, 1), ("cube3", 3, 3),
                               ("K5", 1, 1)]:
        s = ALLGATHERS[name]()
        validate(s)
        n = s.topology.n
        assert s.num_steps == steps and s.tau == links * Fraction(n - 1, n)


def _sorted(rows):
    rows = np.asarray(rows)
    return rows[np.lexsort(rows.T[::-1])]


def _chunks(rows):
    """Sends as a sorted list of single-chunk moves (t, v, c, u, w): the XML merges
    consecutive chunk ranges of one (t, v, u, w)."""
    return sorted((t, v, c, u, w) for t, v, lo, hi, u, w in np.asarray(rows).tolist()
                  for c in range(lo, hi))


@pytest.mark.parametrize("name", sorted(ALLGATHERS))
@pytest.mark.parametrize("coll", ["allgather", "reduce-scatter", "allreduce"])
def test_json_round_trip_replays_valid(name, coll):
    s = collectives(name)[coll]
    back = StepSchedule.from_json(s.to_json(), s.topology)
    validate(back)
    assert back.collective == coll and back.tau == s.tau and back.num_steps == s.num_steps
    assert np.array_equal(_sorted(back.sends), _sorted(s.sends))


@pytest.mark.parametrize("name", sorted(ALLGATHERS))
@pytest.mark.parametrize("coll", ["allgather", "reduce-scatter", "allreduce"])
@pytest.mark.parametrize("channels, proto", [(1, "Simple"), (3, "LL")])
def test_xml_sends_equal_json_and_replay(name, coll, channels, proto):
    s = collectives(name)[coll]
    xml = to_msccl_xml(s, channels=channels, protocol=proto)
    doc = parse_msccl_xml(xml)
    assert doc["channels"] == channels and doc["protocol"] == proto
    json_sends = np.array(StepSchedule.from_json(s.to_json(), s.topology).sends)
    assert _chunks(doc["sends"]) == _chunks(json_sends)
    back = schedule_from_xml(xml, s.topology)
    validate(back)
    assert back.tau == s.tau and back.num_steps == s.num_steps


# ---- an independent interpreter of the XML program -------------------------------------------
def run_xml(xml: str, seed: int):
    """Execute every rank's threadblocks in a random interleaving that respects only what the
    XML states: in-order steps per threadblock, depid/deps, and FIFO send→recv matching per
    (sender, receiver, channel). Buffers hold symbolic data: allgather pieces carry their
    (shard, piece) label, reductions a Counter of contributing ranks."""
    algo = ET.fromstring(xml)
    n, per = int(algo.get("ngpus")), int(algo.get("nchunksperloop")) // int(algo.get("ngpus"))
    coll = algo.get("coll")
    rng = random.Random(seed)
    bufs, tbs = {}, []
    for gpu in algo.iter("gpu"):
        u = int(gpu.get("id"))
        o_chunks, s_chunks = int(gpu.get("o_chunks")), int(gpu.get("s_chunks"))
        if coll == "allgather":
            bufs[u] = {"i": [(u, c) for c in range(per)], "o": [None] * o_chunks}
        else:
            bufs[u] = {"i": [Counter({u: 1}) for _ in range(n * per)], "o": [None] * o_chunks}
        bufs[u]["s"] = [None] * s_chunks
        for tb in gpu.iter("tb"):
            tbs.append((u, tb, list(tb.iter("step"))))
    done, pos = set(), {(u, tb.get("id")): 0 for u, tb, _ in tbs}
    fifo = defaultdict(deque)
    while True:
        ready = []
        for u, tb, steps in tbs:
            i = pos[(u, tb.get("id"))]
            if i == len(steps):
                continue
            st = steps[i]
            dep = (u, st.get("depid"), int(st.get("deps")))
            if st.get("depid") != "-1" and dep not in done:
                continue
            key = (int(tb.get("recv")), u, tb.get("chan"))
            if st.get("type") in ("r", "rrc") and not fifo[key]:
                continue
            ready.append((u, tb, st, i))
        if not ready:
            break
        u, tb, st, i = rng.choice(ready)
        kind, cnt = st.get("type"), int(st.get("cnt"))
        so, do = int(st.get("srcoff")), int(st.get("dstoff"))
        b = bufs[u]
        if kind == "s":
            fifo[(u, int(tb.get("send")), tb.get("chan"))].append(
                [x.copy() if isinstance(x, Counter) else x for x in b[st.get("srcbuf")][so:so + cnt]])
        elif kind in ("r", "rrc"):
            data = fifo[(int(tb.get("recv")), u, tb.get("chan"))].popleft()
            assert len(data) == cnt
            for k, x in enumerate(data):
                cell = b[st.get("dstbuf")]
                cell[do + k] = (b[st.get("srcbuf")][so + k] + x) if kind == "rrc" else x
        elif kind == "cpy":
            b[st.get("dstbuf")][do:do + cnt] = b[st.get("srcbuf")][so:so + cnt]
        done.add((u, tb.get("id"), i))
        pos[(u, tb.get("id"))] += 1
    assert all(pos[(u, tb.get("id"))] == len(steps) for u, tb, steps in tbs), "deadlock"
    assert not any(fifo.values()), "unreceived messages"
    return n, per, coll, bufs


@pytest.mark.parametrize("name", sorted(ALLGATHERS))
@pytest.mark.parametrize("coll", ["allgather", "reduce-scatter", "allreduce"])
def test_xml_program_computes_the_collective(name, coll):
    s = collectives(name)[coll]
    xml = to_msccl_xml(s, channels=2)
    everyone = Counter(range(s.topology.n))
    for seed in range(3):
        n, per, kind, bufs = run_xml(xml, seed)
        for u in range(n):
            if kind == "allgather":
                assert bufs[u]["o"] == [(v, c) for v in range(n) for c in range(per)]
            elif kind == "reducescatter":
                assert all(x == everyone for x in bufs[u]["o"])
            else:
                assert all(x == everyone for x in bufs[u]["o"])


@pytest.mark.parametrize("expr", ["C(12,{2,3})", "Torus(3,4)", "DBJ(2,3)", "Pi(4,12)"])
def test_bfb_schedules_export_to_valid_xml(expr):
    """Optimal BFB schedules (chunk splits, self-loops, unidirectional): XML sends equal the
    JSON's and the interpreted program computes every collective."""
    from topofinder.scoring.allgather.bfb import bfb_schedule
    from topofinder.families.build import parse
    g = parse(expr)
    everyone = Counter(range(g.n))
    for coll in ("allgather", "reduce-scatter", "allreduce"):
        s = bfb_schedule(g, collective=coll)
        validate(s)
        xml = to_msccl_xml(s, channels=2)
        json_sends = StepSchedule.from_json(s.to_json(), g).sends
        assert _chunks(parse_msccl_xml(xml)["sends"]) == _chunks(json_sends)
        n, per, kind, bufs = run_xml(xml, 1)
        for u in range(n):
            if kind == "allgather":
                assert bufs[u]["o"] == [(v, c) for v in range(n) for c in range(per)]
            else:
                assert all(x == everyone for x in bufs[u]["o"])


def test_xml_rejects_mismatched_receive_and_bad_options():
    s = complete_direct(4)
    xml = to_msccl_xml(s)
    broken = xml.replace('type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1"',
                         'type="r" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="1"', 1)
    assert broken != xml
    with pytest.raises(TopofinderError, match="data race"):     # two receives write o[2]
        parse_msccl_xml(broken)
    with pytest.raises(TopofinderError, match="does not parse"):
        parse_msccl_xml("<algo")
    with pytest.raises(TopofinderError, match="protocol"):
        to_msccl_xml(s, protocol="fast")
    with pytest.raises(TopofinderError, match="channels"):
        to_msccl_xml(s, channels=0)


def k4_trees():
    """K(4): each root broadcasts half its shard on the star and half on a path."""
    g = complete(4)
    trees = []
    for r in range(4):
        others = [x for x in range(4) if x != r]
        trees.append(Tree(r, Fraction(1, 2), [(r, x) for x in others]))
        trees.append(Tree(r, Fraction(1, 2), [(r, others[0]), (others[0], others[1]),
                                              (others[1], others[2])]))
    return TreeSchedule(g, trees, method="hand")


def test_tree_schedule_json_npz_xml(tmp_path):
    ts = k4_trees()
    validate_trees(ts)
    back = TreeSchedule.from_json(ts.to_json(), ts.topology)
    validate_trees(back)
    assert back.trees == ts.trees
    save_npz(ts, tmp_path / "t.npz")
    again = load_npz(tmp_path / "t.npz")
    validate_trees(again)
    assert again.trees == ts.trees and again.topology.same_arcs(ts.topology)
    steps = trees_as_steps(ts)          # P = 2; heights 1 (star) and 3 (path)
    validate(steps)
    assert steps.shard_chunks == 2 and steps.num_steps == 3
    xml = to_msccl_xml(steps)
    assert _chunks(parse_msccl_xml(xml)["sends"]) == _chunks(steps.sends)
    n, per, _, bufs = run_xml(xml, 0)
    assert all(bufs[u]["o"] == [(v, c) for v in range(n) for c in range(per)] for u in range(n))


@pytest.mark.parametrize("name", sorted(ALLGATHERS))
@pytest.mark.parametrize("coll", ["allgather", "reduce-scatter", "allreduce"])
def test_npz_round_trip_replays_valid(tmp_path, name, coll):
    s = collectives(name)[coll]
    save_npz(s, tmp_path / "s.npz")
    back = load_npz(tmp_path / "s.npz")
    validate(back)
    assert back.topology.same_arcs(s.topology) and back.topology.expr == s.topology.expr
    assert np.array_equal(back.sends, s.sends) and back.collective == coll
    assert back.reduce_steps == s.reduce_steps and back.tau == s.tau


def test_npz_is_compact_for_large_n(tmp_path):
    """Ring allgather at N = 256 (65,280 sends): stored column-wise in int16 and compressed,
    the file is over 100× smaller than the JSON text of the same schedule."""
    s = ring_allgather(256)
    save_npz(s, tmp_path / "big.npz")
    size = (tmp_path / "big.npz").stat().st_size
    assert size * 100 < len(s.to_json())
    back = load_npz(tmp_path / "big.npz")
    assert back.sends.dtype == np.int64 and np.array_equal(back.sends, s.sends)


def test_npz_bad_file(tmp_path):
    p = tmp_path / "x.npz"
    p.write_bytes(b"not a zip")
    with pytest.raises(TopofinderError, match="cannot read"):
        load_npz(p)


def test_cli_tree_schedule_formats(tmp_path, capsys):
    """`export --what schedule --kind trees --format xml|npz` re-imports and replays valid."""
    from topofinder.cli.main import main
    assert main(["export", "K(4)", "--what", "schedule", "--kind", "trees", "--format", "xml",
                 "--channels", "2", "--protocol", "LL128"]) == 0
    xml = capsys.readouterr().out
    doc = parse_msccl_xml(xml)
    assert doc["channels"] == 2 and doc["protocol"] == "LL128"
    validate(schedule_from_xml(xml, complete(4)))
    path = tmp_path / "t.npz"
    assert main(["export", "K(4)", "--what", "schedule", "--kind", "trees", "--format", "npz",
                 "-o", str(path)]) == 0
    ts = load_npz(path)
    validate_trees(ts, ts.tau())
    assert ts.tau() == Fraction(3, 4)          # K(4): T_B^FC = (N−1)/N (edge-connectivity d)
    assert main(["export", "K(4)", "--what", "schedule", "--kind", "trees", "--format",
                 "yaml"]) == 2
