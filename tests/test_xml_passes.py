"""The MSCCL package on top of the IR (export/msccl/): the streamed XML, the writer's
count and offset checks on the IR's arrays, its shape, the fit checks' refusals, and lanes
budgeted in XML steps."""

import dataclasses
import hashlib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from topofinder.errors import TopofinderError
from topofinder.export.ir.bounds import layout_for
from topofinder.export.ir.deps import resolve
from topofinder.export.ir.lanes import assign_lanes
from topofinder.export.ir.lowering import _fields, lower
from topofinder.export.ir.program import RankProgram
from topofinder.export.ir.steps import allreduce_phases
from topofinder.export.msccl.fit import (
    _check_ranges,
    check_fits,
    lane_count,
    lower_to_fit,
    xml_steps,
)
from topofinder.export.msccl.limits import RUNTIMES
from topofinder.export.msccl.rules import shape
from topofinder.export.msccl.writer import to_msccl_xml
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule


def _code(place):
    """A place (buf, off) as the lowering's code 4·off + buffer code."""
    return 4 * place[1] + "ios".index(place[0])


@pytest.mark.parametrize("expr, coll, opts", [
    ("L(K(4,4))", "allreduce", {"channels": 2}), ("Torus(4,4)", "reduce-scatter", {}),
    ("Hypercube(3)", "allgather", {"inplace": True, "stage": True})])
def test_streamed_xml_is_what_elementtree_writes(expr, coll, opts):
    """The writer emits lines without an element tree; ElementTree reading the text and
    writing it back (indented by one space) gives the same text, labels escaped alike."""
    s = collective_schedule(from_expression(expr), coll)
    names = tuple(f'h"{i}&<x>' for i in range(s.topology.n))
    s = dataclasses.replace(s, topology=dataclasses.replace(s.topology, labels=names))
    text = to_msccl_xml(s, **opts)
    root = ET.fromstring(text)
    assert [g.get("label") for g in root.iter("gpu")] == list(names)
    ET.indent(root, space=" ")
    assert ET.tostring(root, encoding="unicode") + "\n" == text


@pytest.mark.parametrize("bad", ["cnt", "offset", "scratch"])
def test_the_writer_checks_counts_and_offsets_on_the_arrays(bad):
    """The parser's count and offset rules, checked on the resolved program (the writer no
    longer parses its own text): a copy of 72 pieces, one past the output (N·k·P = 4 pieces
    at N = 2, k = 2, P = 1; the last instance is shifted by P), or one scratch piece past
    the scratch in use is refused; the same copy within range passes."""
    rt = RUNTIMES["msccl-executor"]
    for wrong in (False, True):
        prog = RankProgram(0, [1], [1], False, "allgather", 2)
        cnt = 72 if wrong and bad == "cnt" else 1
        dst = {"cnt": ("o", 0), "offset": ("o", 2 + wrong), "scratch": ("s", 1 + wrong)}[bad]
        prog.load(_fields(1, -1, 3, 0, _code(dst), cnt, 0, 0, 0, _code(dst)), 2)
        resolve([prog])
        if wrong:
            with pytest.raises(TopofinderError, match="count or offset"):
                _check_ranges(prog, 2, 2, rt)
        else:
            _check_ranges(prog, 2, 2, rt)


@pytest.mark.parametrize("expr, coll, opts", [
    ("L(K(4,4))", "allgather", {}),
    ("L^2(K(3,3))", "allgather", {"stage": True, "channels": 2, "runtime": "msccl"}),
    ("Torus(4,4)", "reduce-scatter", {"inplace": True, "max_steps": 8}),
    ("L^2(C(6,{1,2}))", "allreduce", {"max_steps": 8}),
    ("C(8,{1,2})", "allreduce", {"channels": 3, "inplace": True}),
    ("Hypercube(3)", "allreduce", {"channels": 2, "interleave": True})])
def test_the_writers_shape_is_the_one_counted_on_its_text(expr, coll, opts):
    """The shape the writer reports (threadblocks, the fullest rank and threadblock) is what
    msccl_check.shape counts on the XML it returned."""
    figures: dict = {}
    text = to_msccl_xml(collective_schedule(from_expression(expr), coll), shape=figures, **opts)
    assert figures == shape(text) and figures["max_steps_per_tb"] > 0


def _elements_figure(sched, monkeypatch, max_nodes, **kw):
    """check_fits' per-rank element figure under a runtime holding ``max_nodes`` (None when
    it passes) and the refusal text."""
    rt = RUNTIMES["msccl-executor"]
    monkeypatch.setitem(RUNTIMES, "msccl-executor", dataclasses.replace(rt, max_nodes=max_nodes))
    try:
        check_fits(sched, **kw)
    except TopofinderError as exc:
        return int(re.search(r"load at least (\d+) XML", str(exc)).group(1)), str(exc)
    finally:
        monkeypatch.setitem(RUNTIMES, "msccl-executor", rt)
    return None, ""


@pytest.mark.parametrize("expr", ["L(K(4,4))", "Torus(4,4)"])
def test_allreduce_refusal_names_its_two_phases_when_each_fits(expr, monkeypatch):
    """The allreduce is the reduce-scatter then the allgather (collective_schedule builds it
    so): its phases split back are those schedules. Under a parser holding fewer elements
    than the allreduce needs but more than each phase needs, the refusal offers the two
    programs back to back; when a phase does not fit either, it does not."""
    recipe = from_expression(expr)
    ar = collective_schedule(recipe, "allreduce")
    rs, ag = allreduce_phases(ar)
    for got, coll in ((rs, "reduce-scatter"), (ag, "allgather")):
        want = collective_schedule(recipe, coll)
        assert got.collective == coll and got.num_steps == want.num_steps
        assert sorted(map(tuple, got.sends.tolist())) == sorted(map(tuple, want.sends.tolist()))
    tight = ar.topology.n + 2
    need_ar, _ = _elements_figure(ar, monkeypatch, tight)
    need = [_elements_figure(x, monkeypatch, tight)[0] for x in (rs, ag)]
    assert need_ar > max(need)
    between, text = _elements_figure(ar, monkeypatch, max(need) + 1)
    assert between == need_ar and "back to back" in text
    rt = RUNTIMES["msccl-executor"]
    monkeypatch.setitem(RUNTIMES, "msccl-executor",
                        dataclasses.replace(rt, max_nodes=max(need) + 1))
    with pytest.raises(TopofinderError, match="back to back"):   # neither mode of K = 2
        to_msccl_xml(ar, channels=2)
    monkeypatch.setitem(RUNTIMES, "msccl-executor", rt)
    _, text = _elements_figure(ar, monkeypatch, min(need))
    assert "back to back" not in text



def test_element_refusals_with_several_channels_advise_fewer(monkeypatch):
    """Each instance repeats every threadblock on a rank, so a program too large for the
    parser at K = 2 may fit at K = 1: the bound's refusal and the lowering's early stop say
    so at K = 2 and not at K = 1 (where fewer channels cannot help)."""
    sched = collective_schedule(from_expression("L(K(4,4))"), "reduce-scatter")
    one, _ = _elements_figure(sched, monkeypatch, sched.topology.n + 2)
    two, text = _elements_figure(sched, monkeypatch, sched.topology.n + 2, channels=2)
    assert two > one and "use --channels 1 or fewer" in text
    _, text = _elements_figure(sched, monkeypatch, sched.topology.n + 2)
    assert "--channels" not in text
    small = dataclasses.replace(RUNTIMES["msccl-executor"], max_nodes=sched.topology.n + 40)
    for k, advice in ((1, False), (2, True)):
        with pytest.raises(TopofinderError, match="elements its parser holds") as err:
            lower_to_fit(sched, k, False, small, 64, None, "x", layout_for(sched, k))
        assert ("use --channels 1 or fewer" in str(err.value)) == advice


def test_allgather_xml_is_byte_identical_to_the_earlier_lowering():
    """The lowering engine's speed-ups (record once, resolve per lane plan, array
    dependencies, array checks, array emit) change no byte: 42 allgather exports (6
    topologies × 7 option sets: channels, in place, staged or not, lanes forced by a small
    step limit) hash to what main's per-instruction lowering wrote (digests in
    tests/data/msccl_xml_allgather_digests.json), and the one it refused is still refused
    with the same text. A deliberate change of the output regenerates that file."""
    ref = json.loads((Path(__file__).parent / "data" /
                      "msccl_xml_allgather_digests.json").read_text())
    for key in sorted({*ref["sha256"], *ref["refused"]}):
        expr, coll, opt = key.split("|")
        sched = collective_schedule(from_expression(expr), coll)
        try:
            got = hashlib.sha256(to_msccl_xml(sched, **ref["options"][int(opt)]).encode())
        except TopofinderError as exc:
            assert ref["refused"].get(key) == str(exc), key
            continue
        assert ref["sha256"].get(key) == got.hexdigest(), key


@pytest.mark.parametrize("coll", ["allgather", "allreduce"])
def test_a_lane_plan_names_the_channels_its_placed_programs_use(coll):
    """The first lane plan is checked before it is resolved (its channels from the plan)
    and stops at its first failing batch of ranks: the plan's highest lane + 1 is the lane
    count of the programs placed on it, for every way of dealing and budget, and a resolve
    with a check returns the check's first answer, leaving later ranks as they were."""
    s = collective_schedule(from_expression("L(K(4,4))"), coll)
    progs = lower(s, 1, False, 71, stage=False, layout=layout_for(s, 1, False))
    resolve(progs)
    before = [xml_steps(prog) for prog in progs]
    for ways in (1, 2, 3):
        for plan in assign_lanes(progs, (5, 7, 12), xml_steps, ways):
            resolve(progs, plan)
            span = 1 + max((int(lane.max()) for _, lane in plan.values()), default=0)
            assert span == lane_count(progs) and span >= min(ways, 2)
    resolve(progs)
    plan = assign_lanes(progs, (5,), xml_steps, 2)[0]
    seen = []
    got = resolve(progs, plan, batch=4, check=lambda part: seen.append(len(part)) or
                   (f"stop at {part[0].u}" if len(seen) == 2 else None))
    assert got == "stop at 4" and seen == [4, 4]
    assert all((xml_steps(prog) == old).all() for prog, old in zip(progs[8:], before[8:]))
    assert min(max(prog.lane) for prog in progs[:8]) >= 1 and \
        max(max(prog.lane) for prog in progs[8:]) == 0
