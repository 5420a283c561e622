"""`--channels K` as K instances or as one interleaved instance (issue 28: K channels' worth
of parallelism where K instances exceed the parser's elements per rank)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from topofinder import api
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.export.msccl.execution import check
from topofinder.export.msccl.fit import check_fits
from topofinder.export.msccl.limits import RUNTIMES
from topofinder.export.msccl.parser import TYPE, TYPES, T, parse
from topofinder.export.msccl.reimport import parse_msccl_xml
from topofinder.export.msccl.writer import to_msccl_xml
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule

COLLS = ("allgather", "reduce-scatter", "allreduce")


def _schedule(expr, coll):
    return collective_schedule(from_expression(expr), coll)


def _moves(rows):
    return sorted((t, v, c, u, w) for t, v, lo, hi, u, w in rows.tolist()
                  for c in range(lo, hi))


def _per_link(text: str) -> Counter:
    """Non-nop instructions per (rank, send or recv, peer, schedule step t, channel)."""
    algo = parse(text)
    nop = TYPES.index("nop")
    out = Counter()
    for g in algo.gpus:
        for tb in g.tbs:
            if tb.send >= 0 or tb.recv >= 0:
                side, peer = ("send", tb.send) if tb.send >= 0 else ("recv", tb.recv)
                rows = algo.table[tb.steps]
                for t in rows[rows[:, TYPE] != nop, T].tolist():
                    out[(g.id, side, peer, t, tb.chan)] += 1
    return out


@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("expr", ["Torus(4,4)", "L(K(4,4))"])
def test_interleaved_channels_deal_each_links_messages_in_turn(expr, coll):
    """One instance over K = 2 channels: a connection's instructions of the one-channel
    program, one per (step, message run) slot (no lanes at these sizes), are dealt in turn:
    the i-th of a link, in step order, goes to channel i mod 2, so at step t channel 0 holds
    those of its m_t slots whose index i₀(t) + r is even (i₀(t): the link's slots before
    step t), on the sending and on the receiving side. The program loads and completes at
    capacity 1 and 2, moves the schedule's chunks, and a rank loads fewer elements than
    with two instances."""
    s = _schedule(expr, coll)
    single = _per_link(to_msccl_xml(s, channels=1))
    two = to_msccl_xml(s, channels=2, interleave=True)
    dealt = _per_link(two)
    assert {key[4] for key in single} == {0} and {key[4] for key in dealt} == {0, 1}
    seen = Counter()
    for (u, side, peer, t, _), m in sorted(single.items()):
        i0 = seen[(u, side, peer)]
        even = sum((i0 + r) % 2 == 0 for r in range(m))
        assert (dealt[(u, side, peer, t, 0)], dealt[(u, side, peer, t, 1)]) == (even, m - even)
        seen[(u, side, peer)] += m
    assert sum(dealt.values()) == sum(single.values())
    stats = check(two, "msccl-executor", capacities=(1, 2))
    doc = parse_msccl_xml(two)
    assert doc["channels"] == 1 and parse(two).nchannels == 2
    assert _moves(doc["sends"]) == _moves(s.sends)
    inst = check(to_msccl_xml(s, channels=2, interleave=False), "msccl-executor", (1,))
    assert stats["max_nodes_per_rank"] < inst["max_nodes_per_rank"]


def _tight(monkeypatch, sched):
    """A runtime whose parser holds fewer elements than two instances of ``sched`` load
    but more than its interleaved program does (measured by the writer itself)."""
    inst = check(to_msccl_xml(sched, channels=2, interleave=False), "msccl-executor", (1,))
    dealt = check(to_msccl_xml(sched, channels=2, interleave=True), "msccl-executor", (1,))
    assert dealt["max_nodes_per_rank"] < inst["max_nodes_per_rank"]
    rt = RUNTIMES["msccl-executor"]
    monkeypatch.setitem(RUNTIMES, "msccl-executor",
                        dataclasses.replace(rt, max_nodes=dealt["max_nodes_per_rank"] + 1))


def test_channels_fall_back_to_one_interleaved_instance_and_say_so(monkeypatch, tmp_path,
                                                                  capsys):
    """Where two instances exceed the parser's elements per rank, `--channels 2` writes the
    interleaved program (one instance: nchunksperloop = N·P) and says why on stderr; the
    API's early check passes it; `--channel-mode instances` refuses in one line; the written
    file loads under that parser and completes."""
    expr, coll = "L(K(4,4))", "reduce-scatter"
    sched = _schedule(expr, coll)
    _tight(monkeypatch, sched)
    with pytest.raises(TopofinderError, match="XML elements"):
        check_fits(sched, 2, interleave=False)
    notes = []
    text = to_msccl_xml(sched, channels=2, note=notes.append)
    assert len(notes) == 1 and "not as 2 instances" in notes[0]
    assert parse(text).nchunksperloop == sched.topology.n * sched.shard_chunks
    check(text, "msccl-executor", capacities=(1, 2))
    _, again = api.export_schedule_of(expr, "xml", None, collective=coll, channels=2)
    assert again == text
    out = tmp_path / "rs.xml"
    assert main(["export", expr, "--what", "schedule", "--collective", coll, "--format", "xml",
                 "--channels", "2", "-o", str(out)]) == 0
    assert "not as 2 instances" in capsys.readouterr().err
    assert out.read_text() == text
    assert main(["export", expr, "--what", "schedule", "--collective", coll, "--format", "xml",
                 "--channels", "2", "--channel-mode", "instances", "-o",
                 str(tmp_path / "no.xml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "XML elements" in err[0]
    assert not (tmp_path / "no.xml").exists()


def test_instances_stay_where_they_fit():
    """Auto mode changes nothing where K instances fit: the same text as asking for them,
    and no note."""
    sched = _schedule("Torus(4,4)", "allreduce")
    notes = []
    assert to_msccl_xml(sched, channels=2, note=notes.append) == \
        to_msccl_xml(sched, channels=2, interleave=False)
    assert notes == []
