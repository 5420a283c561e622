"""MSCCL++ execution plans written by `export --format mscclpp` (issue 37): every plan the
project's execution model of the executor accepts with the collective's exact result over two
launches, a plan read back replays to search's (T_L, τ), and what cannot fit is refused in
one line before any lowering."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from topofinder import api
from topofinder.errors import TopofinderError
from topofinder.export.mscclpp import check_plan
from topofinder.export.mscclpp import plan_writer
from topofinder.export.ir.steps import broadcast_steps
from topofinder.export.mscclpp.plan_read import schedule_from_plan
from topofinder.export.mscclpp.plan_writer import largest_message, to_mscclpp_plan
from topofinder.model.schedule import validate

COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")


@pytest.mark.parametrize("coll", COLLECTIVES)
@pytest.mark.parametrize("channels,inplace,gpus", [(1, False, 1), (1, True, 1), (2, False, 1),
                                                   (2, True, 2), (1, False, 2)])
def test_small_plans_accepted_with_exact_results(coll, channels, inplace, gpus):
    """C(8,{1,3}) (undirected; with G = 2 its links 2i <-> 2i+1 are memory channels): the
    model runs every op on every rank for two launches, finds no race, deadlock or
    unbalanced signal, and the exact collective result; read back, the plan is the
    schedule's sends."""
    s = api.schedule("C(8,{1,3})", coll)
    shape = {}
    text = to_mscclpp_plan(s, channels=channels, inplace=inplace, gpus_per_node=gpus,
                           shape=shape)
    report = check_plan(text)
    assert report.ok, report.first_error()
    assert report.inplace == inplace
    assert shape["max_ops_per_threadblock"] == report.max_ops_per_threadblock
    assert shape["max_threadblocks_per_rank"] == report.max_threadblocks_per_rank
    assert shape["max_message_bytes"] == report.max_message_bytes
    doc = json.loads(text)
    types = {c["channel_type"] for g in doc["gpus"] for c in g["channels"]}
    assert types == ({"port", "memory"} if gpus == 2 else {"port"})
    back = schedule_from_plan(doc, s.topology)
    validate(back)
    assert (back.num_steps, back.tau) == (s.num_steps, s.tau)


@pytest.mark.parametrize("expr,coll,kind", [("UniRing(1,5)", "allreduce", "steps"),
                                            ("L(K(3,3))", "allreduce", "steps"),
                                            ("L(K(3,3))", "reduce-scatter", "trees"),
                                            ("C(8,{1,3})", "allgather", "trees")])
def test_directed_chained_and_tree_plans_accepted(expr, coll, kind):
    """A directed ring, a program cut into several chained threadblocks (L(K(3,3)):
    more than 64 ops on a rank) and tree schedules."""
    sched = api.schedule(expr, coll, kind)
    steps = sched if kind == "steps" else plan_writer_steps(sched)
    shape = {}
    text = to_mscclpp_plan(steps, shape=shape)
    report = check_plan(text)
    assert report.ok, report.first_error()
    if expr == "L(K(3,3))" and kind == "steps":
        assert max(len(tb["ops"]) for tb in json.loads(text)["gpus"][0]["threadblocks"]) \
            == shape["max_ops_per_threadblock"] == 64


def plan_writer_steps(trees):
    from topofinder.export.ir.steps import trees_as_steps
    return trees_as_steps(trees)


@pytest.mark.parametrize("expr,root", [("C(8,{1,3})", 3), ("L(K(3,3))", 2),
                                       ("UniRing(1,5)", 1)])
@pytest.mark.parametrize("channels,inplace,gpus", [(1, False, 1), (2, True, 2)])
def test_broadcast_plans_accepted(expr, root, channels, inplace, gpus):
    """The periodic one-root broadcast of `score --collective broadcast --root R`, run for
    lag + 1 batches: every rank ends with the root's message (the model's exact check), and
    every piece moves along its tree once (the step program is an allgather of the root's
    shard: each non-root receives each piece exactly once)."""
    topo = api.load(expr)
    periodic = api.schedule_oneroot(topo, "broadcast", root=root)
    steps = broadcast_steps(periodic, topo)
    s = steps.sends
    got = np.zeros((topo.n, steps.shard_chunks), np.int64)
    for t, v, lo, hi, u, w in s.tolist():
        got[w, lo:hi] += 1
    assert (np.delete(got, root, axis=0) == 1).all() and (got[root] == 0).all()
    report = check_plan(to_mscclpp_plan(steps, channels=channels, inplace=inplace,
                                        gpus_per_node=gpus, root=root), root=root)
    assert report.ok, report.first_error()


def test_planted_fault_caught():
    """Dropping the semaphore acquire of a receive point lets a reduction read a partial
    before it has arrived: the model reports it, so the plans' correctness rests on them."""
    doc = json.loads(to_mscclpp_plan(api.schedule("C(8,{1,3})", "reduce-scatter")))
    ops = doc["gpus"][3]["threadblocks"][0]["ops"]
    at = next(i for i, op in enumerate(ops) if op["name"] == "sem_acquire")
    ops[at] = {"name": "nop"}
    report = check_plan(doc)
    assert not report.ok


def test_read_back_replays_to_search_n256():
    """Pi(4,256) allgather (N = 256): the plan read back is a valid schedule whose (T_L, τ)
    are the scorer's (score: T_L and the BFB τ, computed apart from the schedule)."""
    s = api.schedule("Pi(4,256)", "allgather")
    text = to_mscclpp_plan(s)
    back = schedule_from_plan(text, s.topology)
    validate(back)
    scored = api.score("Pi(4,256)")
    assert back.num_steps == scored["T_L"]
    assert back.tau == Fraction(scored["tau_bfb_exact"])


def test_allreduce_layout_read_back_and_refused_when_broken():
    """An allreduce plan records the IR's piece order (here not NCCL's: the candidate with the
    fewest ops); read back through it, the plan is the schedule's sends. A layout that is not
    a bijection onto the N·P places (a repeated base) is refused in one line."""
    s = api.schedule("L(K(3,3))", "allreduce")
    doc = json.loads(to_mscclpp_plan(s, channels=2))
    lay = doc["topofinder"]["layout"]
    n, p = s.topology.n, s.shard_chunks
    base, stride = np.array(lay["base"]), np.array(lay["stride"])
    table = base[:, None] + np.arange(p)[None, :] * stride[:, None]
    assert sorted(table.ravel().tolist()) == list(range(n * p))
    assert (base != np.arange(n) * p).any()                 # not NCCL's shard order
    back = schedule_from_plan(doc, s.topology)
    validate(back)
    assert (back.num_steps, back.tau) == (s.num_steps, s.tau)
    lay["base"][1] = lay["base"][0]
    with pytest.raises(TopofinderError, match="not a layout") as exc:
        schedule_from_plan(doc, s.topology)
    assert "\n" not in str(exc.value)


def test_largest_message_is_the_32_bit_bound():
    """The largest message: chunks of a multiple of 16 bytes whose every offset (index ·
    chunk, up to the span) stays below 2^32."""
    assert largest_message(32, 32) == (2 ** 32 - 1) // 32 // 16 * 16 * 32
    span, chunks = 4176, 4096
    m = largest_message(span, chunks)
    chunk = m // chunks
    assert chunk % 16 == 0 and chunk * span < 2 ** 32 and (chunk + 16) * span >= 2 ** 32


def test_refused_before_lowering(monkeypatch):
    """Beyond 32-bit offsets or beyond the resident threadblocks: one line with the figure,
    from a bound computed on the schedule, before the lowering runs."""
    def no_lowering(*a, **k):
        raise AssertionError("lowered")
    monkeypatch.setattr(plan_writer, "lower", no_lowering)
    s = api.schedule("C(8,{1,3})", "allreduce")
    with pytest.raises(TopofinderError, match="beyond 4294966784 bytes") as exc:
        to_mscclpp_plan(s, max_bytes=2 ** 33)
    assert "\n" not in str(exc.value)
    with pytest.raises(TopofinderError, match="at least 18 threadblocks") as exc:
        to_mscclpp_plan(s, channels=2, max_threadblocks=17)
    assert "\n" not in str(exc.value)


def test_cli_writes_plan_and_refuses(tmp_path):
    out = tmp_path / "plan.json"
    run = subprocess.run([sys.executable, "-m", "topofinder", "export", "C(8,{1,3})", "--what",
                          "schedule", "--collective", "reduce-scatter", "--format", "mscclpp",
                          "--inplace", "--min-bytes", "4096", "-o", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "ops in the fullest threadblock" in run.stderr and "T_L = 2" in run.stderr
    doc = json.loads(out.read_text())
    assert doc["collective"] == "reducescatter" and doc["inplace"] is True
    assert doc["min_message_size"] == 4096 and len(doc["gpus"]) == 8
    bad = tmp_path / "bad.json"
    run = subprocess.run([sys.executable, "-m", "topofinder", "export", "C(8,{1,3})", "--what",
                          "schedule", "--format", "mscclpp", "--max-bytes", str(2 ** 40),
                          "-o", str(bad)], capture_output=True, text=True)
    assert run.returncode != 0 and len(run.stderr.strip().splitlines()) == 1
    assert "32 bits" in run.stderr and not bad.exists()


def test_cli_file_equals_api_text(tmp_path):
    out = tmp_path / "ag.json"
    run = subprocess.run([sys.executable, "-m", "topofinder", "export", "UniRing(1,5)",
                          "--what", "schedule", "--format", "mscclpp", "--channels", "2",
                          "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    _, text = api.export_schedule_of("UniRing(1,5)", "mscclpp", None, channels=2)
    assert out.read_text() == text


@pytest.fixture(scope="module")
def frontier_n256():
    """The frontier of `search --n 256 --d 4` (what the acceptance names, not a copied list)."""
    return [p.expr for p in api.search(256, 4).frontier]


def both_models_accept(text: str, seeds=((0, 0.0), (1, 0.9))) -> None:
    """The project's execution model and the independent reference (tests/mscclpp_reference.py:
    explicit state, asynchronous proxies; an eager and a lazy-proxy random schedule) both
    accept the plan with the collective's exact result over two launches."""
    from mscclpp_reference import Reference
    report = check_plan(text)
    assert report.ok, report.first_error()
    ref = Reference(json.loads(text))
    for seed, lazy in seeds:
        assert ref.correct(ref.run_random(seed, lazy_proxy=lazy)), (seed, lazy)


@pytest.mark.slow
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_n256_frontier_plans_accepted_by_both_models(frontier_n256, coll):
    """Every frontier point of `search --n 256 --d 4`, each collective, one GPU per node (port
    channels only), exported as `export --format mscclpp` writes it."""
    assert len(frontier_n256) >= 3
    for expr in frontier_n256:
        _, text = api.export_schedule_of(expr, "mscclpp", None, collective=coll)
        doc = json.loads(text)
        assert {c["channel_type"] for g in doc["gpus"] for c in g["channels"]} == {"port"}
        both_models_accept(text)


N1024 = "L^3(C(16,{1,6}))"      # the recommended point of search --n 1024 --d 4


@pytest.mark.slow
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_n1024_recommended_plans(coll):
    """The recommended N = 1024 point, each collective: the model's parser and limits accept
    every rank, the figures agree with the writer's, and the plan read back replays to the
    schedule's (T_L, τ). (Both models' full runs: the next test.)"""
    from topofinder.export.mscclpp.plan_limits import check_limits
    from topofinder.export.mscclpp.plan_parse import parse_plan
    s = api.schedule(N1024, coll)
    shape = {}
    doc = json.loads(to_mscclpp_plan(s, shape=shape))
    limits = check_limits(parse_plan(doc))
    assert limits.max_ops_per_threadblock == shape["max_ops_per_threadblock"] <= 64
    assert limits.max_threadblocks_per_rank == shape["max_threadblocks_per_rank"] <= 132
    assert limits.max_message_bytes == shape["max_message_bytes"]
    back = schedule_from_plan(doc, s.topology)
    validate(back)
    assert (back.num_steps, back.tau) == (s.num_steps, s.tau)


@pytest.mark.slow
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_n1024_recommended_plans_accepted_by_both_models(coll):
    """The recommended point of `search --n 1024 --d 4`, each collective, as export writes it:
    both models accept (minutes each, the model's allreduce 12 GB: results/mscclpp_plans.md
    has the figures)."""
    res = api.search(1024, 4)
    expr = res.frontier[res.recommended].expr
    _, text = api.export_schedule_of(expr, "mscclpp", None, collective=coll)
    both_models_accept(text, seeds=((0, 0.0),))


def test_broadcast_plan_of_a_directed_platform(tmp_path):
    """Paper 003's Figure 1 is directed and not strongly connected: export reads it with what a
    broadcast from root 0 needs, and its plan runs to the exact result in the model; a root
    that does not reach every node is refused in one line."""
    fig1 = Path(__file__).parent / "data" / "paper003_fig1.edges"
    out = tmp_path / "fig1.json"
    cli = [sys.executable, "-m", "topofinder", "export", str(fig1), "--what", "schedule",
           "--collective", "broadcast", "--format", "mscclpp"]
    done = subprocess.run(cli + ["--root", "0", "-o", str(out)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = check_plan(out.read_text(), collective="broadcast", root=0)
    assert report.ok, report.first_error()
    refused = subprocess.run(cli + ["--root", "1", "-o", str(tmp_path / "x.json")],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert "cannot be reached from root 1" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "x.json").exists()
