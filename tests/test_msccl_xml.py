"""MSCCL XML that a runtime loads and completes: every exported XML passes the msccl-executor
parser's limits and runs to the right result with connection buffers of one and two
transmissions; the checker itself fails on deadlocking and wrong XMLs; limits are refused
with one line before anything is written."""

import os
import xml.etree.ElementTree as ET
from fractions import Fraction

import pytest

from topofinder import api
from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.export.ir.bounds import layout_for
from topofinder.export.ir.steps import trees_as_steps
from topofinder.export.msccl.execution import check, execute
from topofinder.export.msccl.limits import MscclCheckError, MscclDeadlock
from topofinder.export.msccl.reimport import parse_msccl_xml, schedule_from_xml
from topofinder.export.msccl.rules import check_limits
from topofinder.export.msccl.writer import instruction_counts, to_msccl_xml
from topofinder.families.build import parse
from topofinder.finder.frontier import predicted_frontier
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import collective_schedule, verify_candidate
from topofinder.model.schedule import validate

COLLS = ("allgather", "reduce-scatter", "allreduce")
_CACHE = {}


def schedule(expr, coll):
    if (expr, coll) not in _CACHE:
        _CACHE[(expr, coll)] = collective_schedule(from_expression(expr), coll)
    return _CACHE[(expr, coll)]


def chunk_moves(rows):
    return sorted((t, v, c, u, w) for t, v, lo, hi, u, w in rows.tolist()
                  for c in range(lo, hi))


def exported_runs(expr, coll, channels, inplace=False):
    """Export, check the executor's limits, run at capacity 1 and 2, and re-import: the
    program moves exactly the schedule's chunks at the schedule's steps."""
    s = schedule(expr, coll)
    xml = to_msccl_xml(s, channels=channels, inplace=inplace)
    stats = check(xml, "msccl-executor", capacities=(1, 2))
    assert stats["max_steps_per_tb"] <= 64
    assert chunk_moves(parse_msccl_xml(xml)["sends"]) == chunk_moves(s.sends)
    return xml, stats


@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("expr", ["C(16,{1,6})", "Torus(4,4)", "L(K(4,4))"])
def test_xml_loads_and_completes(expr, coll, channels):
    exported_runs(expr, coll, channels)


@pytest.mark.slow
@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("expr", ["Torus(8,8)", "Hypercube(6)"])
def test_xml_loads_and_completes_n64(expr, coll, channels):
    exported_runs(expr, coll, channels)


@pytest.mark.slow
@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("expr", ["C(16,{1,6})", "Torus(4,4)", "Torus(8,8)", "Hypercube(6)",
                                  "L(K(4,4))"])
def test_in_place_xml_loads_and_completes(expr, coll):
    exported_runs(expr, coll, 2, inplace=True)


@pytest.mark.parametrize("channels", [1, 2])
def test_coarse_class_layout_in_place_completes(channels):
    """L^3(K(2,2)) allreduce in the layout by coarse walk classes then chunk (stride > 1),
    in place (NCCL's aliasing of input and output) on 1 and 2 channels: within the limits,
    complete at capacity 1 and 2, and the same sends re-imported."""
    assert layout_for(schedule("L^3(K(2,2))", "allreduce"), channels).name == \
        "out/in classes, chunk, finer classes"
    exported_runs("L^3(K(2,2))", "allreduce", channels, inplace=True)


def test_torus8x8_allreduce_fits_default_executor():
    """The case the executor refused before (75 instructions in one threadblock): now every
    threadblock has at most 64 and the program completes at buffer capacity 1."""
    xml, stats = exported_runs("Torus(8,8)", "allreduce", 1)
    assert stats["max_steps_per_tb"] <= 64
    assert instruction_counts(xml)["max"] == stats["max_steps_per_tb"]


@pytest.mark.parametrize("coll", COLLS)
def test_in_place_variants(coll):
    """In place: NCCL's aliasing (allgather input inside the output, reduce-scatter output
    inside the input, allreduce one buffer); the XML declares only that mode."""
    xml, _ = exported_runs("Torus(4,4)", coll, 2, inplace=True)
    algo = ET.fromstring(xml)
    assert (algo.get("inplace"), algo.get("outofplace")) == ("1", "0")
    with pytest.raises(MscclCheckError, match="cannot run out of place"):
        execute(xml, 1, inplace=False)


def test_out_of_place_reduce_scatter_keeps_partials_out_of_the_input():
    """No step of the out-of-place reduce-scatter writes the input buffer i."""
    xml = to_msccl_xml(schedule("C(16,{1,6})", "reduce-scatter"))
    steps = ET.fromstring(xml).iter("step")
    writers = [st for st in steps if st.get("type") in ("r", "rrc", "cpy", "re")]
    assert writers and all(st.get("dstbuf") != "i" for st in writers)
    assert any(st.get("dstbuf") == "s" for st in writers)      # partials go to scratch


def test_consolidation_and_fused_reduction():
    """Contiguous pieces travel in one instruction (cnt > 1) and partial sums are received
    and reduced in one step (rrc); fewer instructions than schedule rows."""
    s = schedule("Torus(8,8)", "allreduce")
    xml = to_msccl_xml(s)
    steps = list(ET.fromstring(xml).iter("step"))
    sends = [st for st in steps if st.get("type") == "s"]
    assert max(int(st.get("cnt")) for st in sends) > 1
    assert any(st.get("type") == "rrc" for st in steps)
    assert len(sends) < sum(hi - lo for _, _, lo, hi, _, _ in s.sends.tolist())


# ---- runtimes and limits ----------------------------------------------------------------
def test_runtime_spelling_and_max_bytes():
    s = schedule("Torus(4,4)", "reduce-scatter")
    ex = ET.fromstring(to_msccl_xml(s))
    assert ex.get("coll") == "reducescatter" and ex.get("maxBytes") == "0"
    ms_text = to_msccl_xml(s, runtime="msccl", min_bytes=1024, max_bytes=1 << 20)
    ms = ET.fromstring(ms_text)
    assert ms.get("coll") == "reduce_scatter"
    assert (ms.get("minBytes"), ms.get("maxBytes")) == ("1024", str(1 << 20))
    assert int(ET.fromstring(to_msccl_xml(s, runtime="msccl")).get("maxBytes")) > 1 << 40
    check_limits(ms_text, "msccl")
    with pytest.raises(MscclCheckError, match="reducescatter"):
        check_limits(ms_text, "msccl-executor")
    with pytest.raises(MscclCheckError, match="reduce_scatter"):
        check_limits(ET.tostring(ex, encoding="unicode"), "msccl")
    ex.set("coll", "reduce_scatter")
    ex.set("maxBytes", "0")                        # msccl never selects size < 0
    with pytest.raises(MscclCheckError, match="never selected"):
        check_limits(ET.tostring(ex, encoding="unicode"), "msccl")
    with pytest.raises(TopofinderError, match="min-bytes < max-bytes"):
        to_msccl_xml(s, min_bytes=10, max_bytes=5)


def test_step_limit_refused_with_the_figure():
    """Torus(8,8) allreduce under a 1-step limit: one step of one link alone needs more, so no
    spreading over lanes helps; refused with the figure."""
    s = schedule("Torus(8,8)", "allreduce")
    with pytest.raises(TopofinderError, match=r"has \d+ instructions, the limit is 1 "
                                              r"\(MSCCL_MAX_NUM_STEPS\)"):
        to_msccl_xml(s, max_steps=1)


@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("coll", COLLS)
def test_lanes_spread_a_link_over_channels_in_time(coll, channels):
    """Under half the step limit the direct program needs, each link's later steps move to
    threadblocks on further channels (lanes): every threadblock fits, the program completes at
    capacity 1 and 2 and moves exactly the schedule's chunks at its steps."""
    s = schedule("Torus(4,4)", coll)
    need = check(to_msccl_xml(s, channels=channels), "msccl-executor",
                 capacities=())["max_steps_per_tb"]
    limit = need // 2
    xml = to_msccl_xml(s, channels=channels, max_steps=limit)
    stats = check(xml, "msccl-executor", capacities=(1, 2), max_steps=limit)
    assert stats["max_steps_per_tb"] <= limit
    assert int(ET.fromstring(xml).get("nchannels")) > channels
    doc = parse_msccl_xml(xml)
    assert doc["channels"] == channels
    assert chunk_moves(doc["sends"]) == chunk_moves(s.sends)


def test_cli_refuses_l3_before_writing(tmp_path, capsys):
    """L^3(C(16,{1,6})) allreduce (N = 1024) as 2 instances: its links fit on lanes, but a
    rank's program passes the parser's 4095 elements in every candidate layout; check_fits'
    bounds (allgather runs by offset, reduce runs of input-held pieces) show it from the
    schedule arrays in seconds, before any lowering; refused with the figure and the limit
    named, nothing written. (`--channels 2` alone writes one interleaved instance.)"""
    out = tmp_path / "big.xml"
    assert main(["export", "L^3(C(16,{1,6}))", "--what", "schedule", "--collective",
                 "allreduce", "--format", "xml", "--channels", "2", "--channel-mode",
                 "instances", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "MAX_NODES" in err and "json or npz" in err and len(err.splitlines()) == 1
    assert "at least" in err and "XML elements" in err
    assert not out.exists()


def _searched_allreduce(n: int, expr: str):
    """(T_L, τ) of the allreduce `search --n n --d 4` prices for its frontier point ``expr``."""
    for c in predicted_frontier(n, 4, False, jobs=1, use_cache=False):
        if c.expr == expr:
            point = verify_candidate(c)
            return point.allreduce_T_L, Fraction(point.allreduce_tau)
    raise AssertionError(f"{expr} is not on the N = {n} frontier")


@pytest.mark.parametrize("n,expr,channels", [
    (256, "L^2(C(16,{1,6}))", 1),
    pytest.param(1024, "L^3(C(16,{1,6}))", 1, marks=pytest.mark.slow),
    pytest.param(1024, "L^3(C(16,{1,6}))", 2, marks=pytest.mark.slow)])
def test_frontier_allreduce_is_one_program_at_the_searched_price(n, expr, channels, tmp_path,
                                                                capsys):
    """The recommended allreduce as one MSCCL program (issue 28): `export --format xml`
    writes it within msccl-executor's default limits on every rank (its layout by coarse
    walk classes, then chunk), it completes at capacity 1 and 2 with the exact result, and
    the sends it carries replay to the (T_L, τ) search priced. At N = 1024 two instances
    exceed the parser's elements per rank, so `--channels 2` writes one instance
    interleaved over two channels and says so."""
    out = tmp_path / "ar.xml"
    assert main(["export", expr, "--what", "schedule", "--collective", "allreduce",
                 "--format", "xml", "--channels", str(channels), "-o", str(out)]) == 0
    assert ("not as 2 instances" in capsys.readouterr().err) == (channels == 2)
    xml = out.read_text()
    stats = check(xml, "msccl-executor", capacities=(1, 2))
    assert stats["max_steps_per_tb"] <= 64 and stats["max_nodes_per_rank"] < 4096
    back = schedule_from_xml(xml, parse(expr))
    validate(back)
    assert (back.num_steps, back.tau) == _searched_allreduce(n, expr)


def test_cli_states_the_xml_size_before_writing(tmp_path, capsys):
    out = tmp_path / "t.xml"
    assert main(["export", "Torus(4,4)", "--what", "schedule", "--format", "xml", "-o",
                 str(out)]) == 0
    err = capsys.readouterr().err
    assert f"MSCCL XML: {out.stat().st_size / 1e6:.1f} MB, writing {out}" in err


def test_cli_xml_options(tmp_path):
    out = tmp_path / "t.xml"
    assert main(["export", "Torus(4,4)", "--what", "schedule", "--collective",
                 "reduce-scatter", "--format", "xml", "--channels", "2", "--runtime", "msccl",
                 "--in-place", "--min-bytes", "4096", "--max-bytes", "65536", "-o",
                 str(out)]) == 0
    text = out.read_text()
    algo = ET.fromstring(text)
    assert algo.get("coll") == "reduce_scatter" and algo.get("nchannels") == "2"
    assert (algo.get("inplace"), algo.get("minBytes"), algo.get("maxBytes")) == (
        "1", "4096", "65536")
    check(text, "msccl")
    assert main(["export", "Torus(4,4)", "--what", "schedule", "--format", "xml",
                 "--max-steps", "2", "-o", str(tmp_path / "no.xml")]) == 2
    assert not os.path.exists(tmp_path / "no.xml")


# ---- the checker fails where it must -------------------------------------------------------
def two_rank_allgather(cnt_first, order=("s", "r"), recv_off=None, tbs="one"):
    """Allgather of 2 pieces per rank on 2 ranks. ``tbs="one"``: the old layout, one
    threadblock per peer that sends its whole shard, then receives the peer's."""
    parts = [('<algo name="t" proto="Simple" nchannels="1" nchunksperloop="4" ngpus="2" '
              'coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">')]
    for u in (0, 1):
        peer = 1 - u
        roff = 2 * peer if recv_off is None else recv_off[u]
        send = (f'type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="{cnt_first}"')
        recv = (f'type="r" srcbuf="o" srcoff="{roff}" dstbuf="o" dstoff="{roff}" '
                f'cnt="{cnt_first}"')
        cpy = f'type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="{2 * u}" cnt="2"'
        body = {"s": send, "r": recv}
        parts.append(f' <gpu id="{u}" i_chunks="2" o_chunks="4" s_chunks="0">')
        if tbs == "one":
            parts.append(f'  <tb id="0" send="{peer}" recv="{peer}" chan="0">')
            for i, kind in enumerate(order + ("c",)):
                ins = cpy if kind == "c" else body[kind]
                parts.append(f'   <step s="{i}" {ins} depid="-1" deps="-1" hasdep="0"/>')
            parts.append('  </tb>')
        else:
            for b, (ins, snd, rcv) in enumerate(((send, peer, -1), (recv, -1, peer),
                                                 (cpy, -1, -1))):
                parts.append(f'  <tb id="{b}" send="{snd}" recv="{rcv}" chan="0">')
                parts.append(f'   <step s="0" {ins} depid="-1" deps="-1" hasdep="0"/>')
                parts.append('  </tb>')
        parts.append(' </gpu>')
    parts.append('</algo>')
    return "\n".join(parts)


def test_checker_detects_old_layout_deadlock():
    """One threadblock per peer that sends its 2 pieces before receiving (the old layout):
    complete with 2 transmissions of buffer, deadlock with 1; split send/receive threadblocks
    complete with 1."""
    xml = two_rank_allgather(2)
    check_limits(xml)
    execute(xml, capacity=2)
    with pytest.raises(MscclDeadlock, match="deadlock at buffer capacity 1.*waits for space"):
        execute(xml, capacity=1)
    execute(two_rank_allgather(2, tbs="split"), capacity=1)
    with pytest.raises(MscclDeadlock, match="waits for data"):     # both receive first
        execute(two_rank_allgather(2, order=("r", "s")), capacity=4)


def test_checker_detects_wrong_results():
    algo = ET.fromstring(two_rank_allgather(2, tbs="split"))
    for st in list(algo)[1].iter("step"):          # rank 1 swaps its own and its peer's place
        if st.get("type") in ("r", "cpy"):
            st.set("dstoff", str(2 - int(st.get("dstoff"))))
    wrong = ET.tostring(algo, encoding="unicode")
    execute(two_rank_allgather(2, tbs="split"), capacity=1)
    with pytest.raises(MscclCheckError, match="wrong allgather result: gpu 1 output piece 0 "
                                              "holds element 2 from rank"):
        execute(wrong, capacity=1)
    s = schedule("C(16,{1,6})", "reduce-scatter")
    xml = to_msccl_xml(s)
    # receive instead of receive-reduce: the partial it held is lost
    broken = xml.replace('type="rrc"', 'type="r"', 1)
    with pytest.raises(MscclCheckError, match="wrong reduce-scatter result|reads .* no data"):
        execute(broken, capacity=2)
    # a reduction with the input cell again: a contribution counted twice
    algo = ET.fromstring(xml)
    for st in algo.iter("step"):
        if st.get("type") == "rrc" and st.get("srcbuf") == "s":
            st.set("srcbuf", "i")
            st.set("srcoff", "0")
            break
    with pytest.raises(MscclCheckError, match="twice|reduces element"):
        execute(ET.tostring(algo, encoding="unicode"), capacity=2)


def test_checker_detects_input_writes_races_and_size_mismatch():
    xml = two_rank_allgather(2, tbs="split")
    bad = xml.replace('type="r" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2"',
                      'type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0"')
    with pytest.raises(MscclCheckError, match="writes the input buffer"):
        execute(bad, capacity=1)
    mism = xml.replace('type="r" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="2"',
                       'type="r" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="1"')
    with pytest.raises(MscclCheckError, match="receives 1 pieces but the next message"):
        execute(mism, capacity=1)
    # drop every dependency of an exported allreduce: some read overtakes its write
    algo = ET.fromstring(to_msccl_xml(schedule("Torus(4,4)", "allreduce")))
    for tb in algo.iter("tb"):
        for st in list(tb):
            if st.get("type") == "nop":
                tb.remove(st)
        for i, st in enumerate(tb):
            st.set("s", str(i))
            st.set("depid", "-1")
            st.set("deps", "-1")
    with pytest.raises(MscclCheckError, match="data race|no data yet"):
        execute(ET.tostring(algo, encoding="unicode"), capacity=2)


def test_limits_emulation():
    """What the executor's parser rejects: a step index beyond MSCCL_MAX_NUM_STEPS, a
    dependency on a step that sets no flag, a nop without dependency, cnt ≥ 72."""
    xml = to_msccl_xml(schedule("Torus(4,4)", "allreduce"))
    stats = check_limits(xml)
    with pytest.raises(MscclCheckError, match="MSCCL_MAX_NUM_STEPS"):
        check_limits(xml, max_steps=stats["max_steps_per_tb"] - 1)
    algo = ET.fromstring(xml)
    dep = next(st for st in algo.iter("step") if st.get("depid") != "-1")
    gpu = next(g for g in algo.iter("gpu") if dep in g.iter("step"))
    target = next(tb for tb in gpu.iter("tb") if tb.get("id") == dep.get("depid"))
    for st in target:                       # no step of the target tb raises its flag
        st.set("hasdep", "0")
    with pytest.raises(MscclCheckError, match="no step there or later sets a flag"):
        check_limits(ET.tostring(algo, encoding="unicode"))
    with pytest.raises(MscclDeadlock, match="waits for tb"):
        execute(ET.tostring(algo, encoding="unicode"), capacity=2)
    big = two_rank_allgather(2, tbs="split").replace('cnt="2"', 'cnt="72"', 1)
    with pytest.raises(MscclCheckError, match="cnt 72"):
        check_limits(big)


def test_tree_schedule_xml_completes(tmp_path):
    """A ForestColl tree allgather (Torus(4,4), as steps by tree depth) exports to an XML that
    loads and completes at capacity 1 and 2 on two channels."""
    out = tmp_path / "trees.xml"
    assert main(["export", "Torus(4,4)", "--what", "schedule", "--kind", "trees", "--format",
                 "xml", "--channels", "2", "-o", str(out)]) == 0
    stats = check(out.read_text(), "msccl-executor", capacities=(1, 2))
    assert 0 < stats["max_steps_per_tb"] <= 64


@pytest.mark.parametrize("coll", ["allgather", "allreduce"])
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("expr", ["C(16,{1,6})",
                                  pytest.param("L(K(4,4))", marks=pytest.mark.slow)])
def test_staged_consolidation_completes(expr, coll, inplace):
    """Messages of several ranges staged through scratch (paper 001 §7): packed by copies,
    sent once, unpacked; still complete at capacity 1 and 2 and move the schedule's chunks."""
    s = schedule(expr, coll)
    xml = to_msccl_xml(s, channels=2, inplace=inplace, stage=True)
    check(xml, "msccl-executor", capacities=(1, 2))
    assert chunk_moves(parse_msccl_xml(xml)["sends"]) == chunk_moves(s.sends)
    steps = list(ET.fromstring(xml).iter("step"))
    packs = [st for st in steps if st.get("type") == "cpy" and st.get("dstbuf") == "s"]
    assert packs and any(st.get("type") == "s" and st.get("srcbuf") == "s" for st in steps)
    direct = to_msccl_xml(s, channels=2, inplace=inplace)
    assert not any(st.get("type") == "cpy" and st.get("dstbuf") == "s"
                   for st in ET.fromstring(direct).iter("step"))


@pytest.mark.slow
def test_torus16x16_allgather_fits_executor_by_staging():
    """Torus(16,16) allgather: direct sends need 66+ instructions in one threadblock (over
    the executor's 64); staged through scratch it fits and completes at capacity 1."""
    s = schedule("Torus(16,16)", "allgather")
    with pytest.raises(TopofinderError, match="limit is 64"):
        to_msccl_xml(s, stage=False)
    xml = to_msccl_xml(s)
    stats = check(xml, "msccl-executor", capacities=(1,))
    assert stats["max_steps_per_tb"] <= 64


@pytest.mark.slow
@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("expr", ["L^2(C(16,{3,4}))", "L^2(C(16,{1,6}))", "Pi(4,256)",
                                  "L^2(K(4,4))"])
def test_n256_frontier_points_fit_the_default_executor(expr, coll):
    """N = 256 (issue 28): within msccl-executor's default limits (64 steps per threadblock,
    spread over lanes), loads on every rank, completes at capacity 1 and 2, moves the
    schedule's chunks (minutes per case)."""
    exported_runs(expr, coll, 1)


#: The frontier of `search --n 256 --d 4` (checked by the test below).
FRONTIER_256_4 = ("L^3(C(4,{1,2}))", "L^2(C(16,{1,6}))", "L(Aff(64,17,{7,21,29,31}))")


@pytest.mark.slow
def test_the_n256_frontier_is_the_one_exported_below():
    assert tuple(p.expr for p in api.search(256, 4).frontier) == FRONTIER_256_4


@pytest.mark.slow
@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("expr", FRONTIER_256_4)
def test_every_n256_frontier_point_runs_on_the_default_executor(expr, coll, channels):
    """Issue 28's acceptance at N = 256: every frontier point of `search --n 256 --d 4`, each
    collective, 1 and 2 channels' worth of instances: within msccl-executor's default limits
    on every rank, complete at capacity 1 and 2 with the exact result, moving the schedule's
    chunks (18 cases, 6 CPU minutes)."""
    exported_runs(expr, coll, channels)


@pytest.mark.parametrize("coll", COLLS)
def test_tree_collectives_as_xml_complete(coll, tmp_path):
    """ForestColl trees of every collective as MSCCL XML (reduce-scatter in-trees leaves
    first, allreduce = those then the allgather out-trees): within the executor's limits,
    complete at capacity 1 and 2; the XML moves exactly the step rows the trees give."""
    out = tmp_path / "trees.xml"
    assert main(["export", "Torus(4,4)", "--what", "schedule", "--kind", "trees",
                 "--collective", coll, "--format", "xml", "-o", str(out)]) == 0
    xml = out.read_text()
    stats = check(xml, "msccl-executor", capacities=(1, 2))
    assert 0 < stats["max_steps_per_tb"] <= 64
    doc = parse_msccl_xml(xml)
    steps = trees_as_steps(api.schedule("Torus(4,4)", coll, "trees"))
    validate(steps)
    assert doc["collective"] == coll
    assert chunk_moves(doc["sends"]) == chunk_moves(steps.sends)


_SLOW = pytest.mark.slow


@pytest.mark.parametrize("expr,coll", [
    ("Pi(4,256)", "allgather"), ("Pi(4,256)", "reduce-scatter"), ("Pi(4,256)", "allreduce"),
    pytest.param("L^2(C(16,{3,4}))", "allgather", marks=_SLOW),
    pytest.param("L^2(C(16,{3,4}))", "reduce-scatter", marks=_SLOW),
    pytest.param("L^2(C(16,{3,4}))", "allreduce", marks=_SLOW)])
def test_n256_tree_schedules_as_xml(expr, coll):
    """ForestColl tree schedules (`--kind trees`) at N = 256 (issue 28): within
    msccl-executor's default limits on every rank, complete at capacity 1 and 2 with the
    exact result, and move exactly the chunks of the step rows ``trees_as_steps`` gives
    (figures in results/msccl_xml_n256.md)."""
    trees, xml = api.export_schedule_of(expr, "xml", None, collective=coll, kind="trees")
    stats = check(xml, "msccl-executor", capacities=(1, 2))
    assert stats["max_steps_per_tb"] <= 64 and stats["max_nodes_per_rank"] < 4096
    steps = trees_as_steps(trees)
    validate(steps)
    assert chunk_moves(parse_msccl_xml(xml)["sends"]) == chunk_moves(steps.sends)


@pytest.mark.parametrize("expr,name", [
    ("L(K(3,3))", "out-quotient, shard-major"),
    ("L^3(K(2,2))", "out/in classes, chunk, finer classes"),
    pytest.param("L^2(C(10,{1,3}))", "in/out classes, chunk, finer classes",
                 marks=pytest.mark.slow),
    pytest.param("C(96,{1,2})", "out-quotient, shard-major", marks=pytest.mark.slow)])
def test_allreduce_layout_rides_on_the_gpus(expr, name):
    """The allreduce layout travels as a short ``base`` and ``stride`` per <gpu> (the
    parser caps attribute values at 254 characters, so a list on <algo> breaks from N ≈ 90
    on); the file loads, completes at capacity 1 and 2, and re-imports to the same sends,
    whichever candidate layout the bound chose."""
    s = collective_schedule(from_expression(expr), "allreduce")
    xml = to_msccl_xml(s)
    root = ET.fromstring(xml)
    lay = layout_for(s)
    assert lay.name == name
    got = {int(g.get("id")): (int(g.get("base")), int(g.get("stride"))) for g in root.iter("gpu")}
    assert got == {v: (int(lay.base[v]), int(lay.stride[v])) for v in range(s.topology.n)}
    assert all(len(v) <= 254 for el in root.iter() for v in el.attrib.values())
    check(xml, capacities=(1, 2))
    assert chunk_moves(parse_msccl_xml(xml)["sends"]) == chunk_moves(s.sends)
