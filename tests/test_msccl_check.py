"""The MSCCL execution model (export/msccl/) against planted faults and a second
method: the streaming parser refuses DTDs and entities and reads paths and files; every
planted fault (wrong peer, wrong offset, missing step, dependency cycle, deadlock at
capacity 1, limit violations) is caught; the count-only flow run decides deadlock exactly as
a piece-by-piece polling simulation does on random programs."""

import io
import random
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from topofinder.export.msccl.execution import _Flow, check, execute
from topofinder.export.msccl.limits import MscclCheckError, MscclDeadlock
from topofinder.export.msccl.parser import parse
from topofinder.export.msccl.rules import check_limits
from topofinder.export.msccl.writer import to_msccl_xml
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule

_XML = {}


def exported(expr="C(16,{1,6})", coll="allreduce"):
    if (expr, coll) not in _XML:
        _XML[(expr, coll)] = to_msccl_xml(collective_schedule(from_expression(expr), coll))
    return _XML[(expr, coll)]


def test_parser_refuses_dtds_and_entities():
    good = exported("C(16,{1,6})", "allgather")
    body = good[good.index("<algo"):]
    laughs = ('<?xml version="1.0"?><!DOCTYPE algo [<!ENTITY a "aaaaaaaaaa">'
              '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>')
    with pytest.raises(MscclCheckError, match="DTDs and entities are refused"):
        parse(laughs + body)
    with pytest.raises(MscclCheckError, match="DTDs and entities are refused"):
        parse('<!DOCTYPE algo SYSTEM "file:///etc/passwd">' + body)
    with pytest.raises(MscclCheckError, match="does not parse"):      # undefined entity
        parse(body.replace('name="', 'name="&x;', 1))
    with pytest.raises(MscclCheckError, match="does not parse"):
        parse(body[:len(body) // 2])


def test_parse_streams_text_bytes_paths_and_files(tmp_path):
    xml = exported("C(16,{1,6})", "allgather")
    path = tmp_path / "a.xml"
    path.write_text(xml)
    ref = parse(xml)
    for source in (xml.encode(), path, io.BytesIO(xml.encode())):
        other = parse(source)
        assert np.array_equal(other.table, ref.table)
        assert [(g.id, [(tb.id, tb.steps) for tb in g.tbs]) for g in other.gpus] == \
            [(g.id, [(tb.id, tb.steps) for tb in g.tbs]) for g in ref.gpus]
    # the table holds every <step> once, in document order, with its attributes
    steps = list(ET.fromstring(xml).iter("step"))
    assert len(ref.table) == len(steps)
    assert [int(x.get("dstoff")) for x in steps] == ref.table[:, 5].tolist()


def _edit(xml, pick, change):
    """The XML with ``change(step, tb, gpu)`` applied to the first step ``pick`` accepts."""
    root = ET.fromstring(xml)
    for g in root.iter("gpu"):
        for tb in g.iter("tb"):
            for st in list(tb):
                if pick(st, tb, g):
                    change(st, tb, g)
                    return ET.tostring(root, encoding="unicode")
    raise AssertionError("nothing to edit")


def _is_send(st, tb, g):
    return st.get("type") == "s" and int(st.get("cnt")) > 0


def _wrong_peer(st, tb, g):
    n = int(g.get("id"))
    others = {int(x.get("send")) for x in g.iter("tb")} | {n}
    tb.set("send", str(next(x for x in range(16) if x not in others)))


def _wrong_offset(st, tb, g):
    st.set("dstoff", str(int(st.get("dstoff")) + 1 if int(st.get("dstoff")) == 0 else 0))


def _last_plain_send(st, tb, g):
    return _is_send(st, tb, g) and st is list(tb)[-1] and st.get("hasdep") == "0"


def _missing_step(st, tb, g):
    tb.remove(st)


@pytest.mark.parametrize("fault,pick,change,match", [
    ("wrong peer", _is_send, _wrong_peer, "never received|deadlock|wrong|holds no data"),
    ("wrong offset", lambda st, tb, g: st.get("type") in ("r", "rrc"), _wrong_offset,
     "wrong|holds no data|race|reduces element"),
    ("missing step", _last_plain_send, _missing_step, "deadlock|never received|wrong"),
])
@pytest.mark.parametrize("coll", ["allgather", "reduce-scatter", "allreduce"])
def test_planted_faults_are_caught(fault, pick, change, match, coll):
    """One wrong peer, offset or dropped send in an exported XML never passes the check."""
    xml = exported("C(16,{1,6})", coll)
    check(xml, capacities=(1, 2))
    bad = _edit(xml, pick, change)
    with pytest.raises(MscclCheckError, match=match):
        check(bad, capacities=(1, 2))


def test_dependency_cycle_deadlocks():
    """Two threadblocks whose first steps wait for each other: the limits pass (each waits
    for a flagged step), the run deadlocks on the flags at any capacity."""
    xml = exported("C(16,{1,6})", "allgather")
    root = ET.fromstring(xml)
    g = next(root.iter("gpu"))
    a, b = list(g.iter("tb"))[:2]
    for tb, other in ((a, b), (b, a)):
        st = tb[0]
        st.set("depid", other.get("id"))
        st.set("deps", "0")
        st.set("hasdep", "1")
    text = ET.tostring(root, encoding="unicode")
    check_limits(text)
    for cap in (1, 2, 1 << 20):
        with pytest.raises(MscclDeadlock, match="waits for tb"):
            execute(text, capacity=cap)


@pytest.mark.parametrize("change,match", [
    (lambda st, tb, g: st.set("srcoff", "40000"), "int16 offsets"),
    (lambda st, tb, g: st.set("depid", "200"), "does not fit int8"),
    (lambda st, tb, g: st.set("hasdep", "2"), "hasdep must be 0 or 1"),
    (lambda st, tb, g: st.set("s", "5"), "step numbers"),
    (lambda st, tb, g: st.set("type", "xx"), "type 'xx' is not one of"),
    (lambda st, tb, g: st.set("dstbuf", "q"), "buffers must be"),
    (lambda st, tb, g: [st.set(f"a{i}", "0") for i in range(8)], "more than 16 attributes"),
    (lambda st, tb, g: tb.set("send", "-1"), "without send peer"),
    (lambda st, tb, g: tb.set("chan", "3"), "channel 3 outside"),
])
def test_limit_violations_are_refused(change, match):
    xml = exported("C(16,{1,6})", "allgather")
    with pytest.raises(MscclCheckError, match=match):
        check_limits(_edit(xml, _is_send, change))


# ---- the flow run against a piece-by-piece simulation ---------------------------------------
def _random_program(rng, n):
    """Random sends/receives (some fused rcs) with random counts between ``n`` gpus, one
    send and one receive threadblock per ordered pair, a few dependencies: a valid XML whose
    piece counts match on every connection (it may deadlock)."""
    msgs = {(u, w): [rng.randint(1, 4) for _ in range(rng.randint(0, 3))]
            for u in range(n) for w in range(n) if u != w}
    parts = ['<algo name="r" proto="Simple" nchannels="1" nchunksperloop="64" ngpus='
             f'"{n}" coll="allreduce" inplace="1" outofplace="0">']
    for u in range(n):
        parts.append(f'<gpu id="{u}" i_chunks="64" o_chunks="64" s_chunks="0">')
        tbs = [(w, -1, msgs[(u, w)]) for w in range(n) if w != u] + \
              [(-1, x, msgs[(x, u)]) for x in range(n) if x != u]
        order = list(range(len(tbs)))
        rng.shuffle(order)
        for i, b in enumerate(order):
            snd, rcv, cnts = tbs[b]
            parts.append(f'<tb id="{i}" send="{snd}" recv="{rcv}" chan="0">')
            for s, c in enumerate(cnts):
                dep = (rng.randrange(i), 0) if i and rng.random() < 0.3 else (-1, -1)
                ty = "s" if snd >= 0 else "r"
                parts.append(f'<step s="{s}" type="{ty}" srcbuf="i" srcoff="0" dstbuf="i" '
                             f'dstoff="0" cnt="{c}" depid="{dep[0]}" deps="{dep[1]}" '
                             f'hasdep="1"/>')
            parts.append('</tb>')
        parts.append('</gpu>')
    return "".join(parts + ['</algo>'])


def _brute_force_deadlocks(algo, cap):
    """Poll every threadblock, one piece at a time, until nothing moves; True if some
    threadblock is unfinished (an independent second method)."""
    prog = []
    for g in algo.gpus:
        for tb in g.tbs:
            rows = algo.table[tb.steps.start:tb.steps.stop].tolist()
            prog.append((g.id, tb, rows))
    index = {(g, tb.id): i for i, (g, tb, _) in enumerate(prog)}
    fifo, flag = {}, [-1] * len(prog)
    pc, k = [0] * len(prog), [0] * len(prog)
    moved = True
    while moved:
        moved = False
        for i, (g, tb, rows) in enumerate(prog):
            while pc[i] < len(rows):
                row = rows[pc[i]]
                if k[i] == 0 and row[7] >= 0 and flag[index[(g, row[7])]] < row[8]:
                    break
                if row[1] == 0:                                   # s
                    key = (g, tb.send)
                    if fifo.get(key, 0) >= cap:
                        break
                    fifo[key] = fifo.get(key, 0) + 1
                else:                                             # r
                    key = (tb.recv, g)
                    if not fifo.get(key, 0):
                        break
                    fifo[key] -= 1
                k[i] += 1
                moved = True
                if k[i] == row[6]:
                    flag[i], pc[i], k[i] = row[0], pc[i] + 1, 0
    return any(pc[i] < len(rows) for i, (_, _, rows) in enumerate(prog))


def test_flow_run_matches_piece_by_piece_polling():
    rng = random.Random(28)
    seen = set()
    for trial in range(120):
        algo = parse(_random_program(rng, rng.randint(2, 4)))
        for cap in (1, 2, 3):
            want = _brute_force_deadlocks(algo, cap)
            try:
                _Flow(algo, cap).run()
                got = False
            except MscclDeadlock:
                got = True
            assert got == want, (trial, cap)
            seen.add(want)
    assert seen == {True, False}


# ---- the price stated next to the XML -------------------------------------------------------
def test_msccl_price_states_the_overhead_apart(tmp_path, capsys):
    """The α-β time is T_L·α + τ·M/B of the exported schedule (001 §3.2) and the overhead
    step·(most steps in a threadblock) + tb·(most threadblocks on a rank), both read from the
    checker's own statistics of the XML; the CLI prints both figures."""
    from fractions import Fraction

    import topofinder as tf
    from topofinder.cli.main import main

    s = collective_schedule(from_expression("C(16,{1,6})"), "allreduce")
    xml = exported("C(16,{1,6})", "allreduce")
    stats = check_limits(xml)
    w = tf.Workload.from_strings("10us", "100Gbps", "1MB")
    price = tf.msccl_price(s, xml, w, step_overhead="3us", tb_overhead=2e-6)
    want = Fraction(10, 10 ** 6) * s.num_steps + Fraction(s.tau) * Fraction(2 ** 20) / \
        Fraction(100 * 10 ** 9, 8)
    assert price["time_s"] == pytest.approx(float(want), rel=1e-12)
    assert (price["max_steps_per_tb"], price["max_tbs_per_rank"]) == (
        stats["max_steps_per_tb"], stats["max_tbs_per_gpu"])
    assert price["threadblocks"] == sum(len(v) for v in stats["steps_per_tb"].values())
    assert price["overhead_s"] == pytest.approx(3e-6 * stats["max_steps_per_tb"] +
                                                2e-6 * stats["max_tbs_per_gpu"])
    assert tf.msccl_price(s, xml)["overhead_s"] == 0
    out = tmp_path / "a.xml"
    assert main(["export", "C(16,{1,6})", "--what", "schedule", "--collective", "allreduce",
                 "--format", "xml", "-o", str(out), "--step-overhead", "3us"]) == 0
    err = capsys.readouterr().err
    assert f"{stats['max_steps_per_tb']} steps in the fullest threadblock" in err
    assert f"runtime overhead {3 * stats['max_steps_per_tb']:g} us" in err
    assert main(["export", "C(16,{1,6})", "--what", "schedule", "--format", "xml", "-o",
                 str(tmp_path / "b.xml"), "--step-overhead", "3"]) == 2
    assert not (tmp_path / "b.xml").exists()
