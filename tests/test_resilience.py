"""Repaired schedules, degraded plans and bypass re-patching (topofinder.resilience): every
degraded schedule replays on the degraded graph, `check` accepts it on the degraded plan and
rejects the intact schedule there; the chosen bypass is the best of all d! matchings, checked
by an independent enumeration."""

from __future__ import annotations

import json
from itertools import permutations

import numpy as np
import pytest

from topofinder import api
from topofinder.cli.main import main
from topofinder.model.schedule import validate
from topofinder.model.topology import Topology
from topofinder.scoring.allgather.bfb import bfb_score
from topofinder.model.tree_schedule import validate as validate_trees
from topofinder.workload.cost import Workload

CASES = [("C(16,{1,6})", "0<->1"), ("C(16,{1,6})", "3"), ("Pi(4,32)", "1->26"),
         ("Pi(4,32)", "7"), ("UniRing(2,6)", "0->1"), ("DBJ(2,4)", "1->2"),
         ("Torus(4,4)", "0->1")]


@pytest.mark.parametrize("expr, failure", CASES)
def test_degraded_schedules_replay_and_check_against_the_degraded_plan(expr, failure, tmp_path,
                                                                      capsys):
    degraded = f"Fail({expr}; {failure})"
    plan = tmp_path / "plan.csv"
    api.export_patch_panel(degraded).write_csv(plan)
    topo = api.load(degraded)
    for collective in ("allgather", "reduce-scatter", "allreduce"):
        s = api.schedule(degraded, collective)
        assert s.topology.same_arcs(topo)
        validate(s)
        path = tmp_path / f"{collective}.json"
        api.export_schedule(s, path=path)
        assert main(["check", str(plan), str(path)]) == 0
    trees = api.schedule(degraded, "allgather", "trees")
    validate_trees(trees)
    api.export_schedule(trees, path=tmp_path / "trees.json")
    assert main(["check", str(plan), str(tmp_path / "trees.json")]) == 0
    intact = tmp_path / "intact.json"
    api.export_schedule(api.schedule(expr, "allgather"), path=intact)
    capsys.readouterr()
    assert main(["check", str(plan), str(intact)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and ("no fibre" in err or "ranks" in err or "plan cables" in err)


def _repatched(g: Topology, x: int, added) -> Topology:
    """Node x removed, survivors renumbered, ``added`` arcs (intact numbers) patched in."""
    keep = (g.src != x) & (g.dst != x)
    new = np.arange(g.n) - (np.arange(g.n) > x)
    a = np.array(added).reshape(-1, 2)
    return Topology(g.n - 1, new[np.concatenate([g.src[keep], a[:, 0]])],
                    new[np.concatenate([g.dst[keep], a[:, 1]])])


@pytest.mark.parametrize("expr, node", [("Pi(4,32)", 5), ("C(16,{1,6})", 0),
                                        ("L(DC(8,{1,2,3,5}))", 9)])
def test_bypass_is_the_best_of_all_d_factorial_matchings(expr, node):
    g = api.load(expr)
    w = Workload()
    doc, diff = api.bypass(expr, node, w)
    ins = sorted(g.src[(g.dst == node) & (g.src != node)].tolist())
    outs = sorted(g.dst[(g.src == node) & (g.dst != node)].tolist())
    assert len(ins) == len(outs) == 4

    def time(h):
        if not h.strongly_connected:
            return float("inf")
        a, r = bfb_score(h), bfb_score(h.transpose())
        return w.collective_time(a.T_L + r.T_L, float(a.tau + r.tau))
    best = min(time(_repatched(g, node, [(ins[i], outs[s[i]]) for i in range(4)]))
               for s in permutations(range(4)))
    assert doc["repatched"]["allreduce_s"] == pytest.approx(best)
    assert doc["method"].startswith("exact")
    fibres = [tuple(map(int, f.split("->"))) for f in doc["fibres"]]
    assert sorted(u for u, _ in fibres) == ins and sorted(v for _, v in fibres) == outs
    assert doc["repatched"]["allreduce_s"] <= doc["nothing"]["allreduce_s"] + 1e-15
    # the diff, applied to the intact plan, cables exactly the re-patched fabric
    unplugged = diff.removed.shape[0] + int(np.count_nonzero(diff.removed_kinds == 1))
    assert diff.added.shape[0] == 4 and unplugged == 8      # a duplex row is two fibres
    after = diff.new.to_topology()
    assert not np.any((after.src == node) | (after.dst == node))
    h = api.load(doc["expr"])
    assert _repatched(g, node, fibres).same_arcs(h)


def test_the_bypass_diff_applies_to_the_intact_plan(tmp_path):
    from topofinder.cabling.check import apply_diff
    from topofinder.cabling.patch_panel import read_plan
    doc, diff = api.bypass("C(16,{1,6})", 3)
    api.export_patch_panel("C(16,{1,6})").write_csv(tmp_path / "plan.csv")
    diff.write_csv(tmp_path / "diff.csv")
    after = apply_diff(read_plan(tmp_path / "plan.csv"), tmp_path / "diff.csv")
    assert after.to_topology().same_arcs(diff.new.to_topology())


def test_failed_expression_round_trips_and_refuses_bad_failures():
    assert api.failed("C(16,{1,6})", ["0<->1"], [4]) == "Fail(C(16,{1,6}); 0<->1, 4)"
    with pytest.raises(api.TopofinderError, match="disconnects"):
        api.failed("DC(8,{1})", ["0->1"])


@pytest.mark.parametrize("argv, message", [
    (["export", "C(16,{1,6})", "--what", "schedule", "--fail", "0->2"],
     "there is not a fibre 0->2 to fail"),
    (["export", "C(16,{1,6})", "--what", "schedule", "--fail-node", "16"],
     "node 16 is out of range 0..15"),
    (["export", "DC(8,{1})", "--what", "schedule", "--fail", "3->4"],
     "disconnects the fabric"),
    (["export", "C(16,{1,6})", "--what", "patch-panel", "--fail", "0<->1", "--fail", "0<->15",
      "--fail", "0<->6", "--fail", "0<->10"], "disconnects the fabric (node 0 cannot reach"),
    (["fail", "C(16,{1,6})", "--repatch", "99"], "node 99 is out of range"),
    (["fail", "C(16,{1,6})", "--links", "3"], "--links takes 0, 1 or 2"),
    (["fail", "Fail(C(16,{1,6}); 0-1)"], "bad failure '0-1'"),
])
def test_bad_failures_at_the_command_line_are_one_line_exit_2(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert captured.out == ""


def test_fail_command_prints_the_survey_and_its_json(capsys):
    assert main(["fail", "Pi(4,32)", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(json.dumps(api.fail("Pi(4,32)", Workload.from_strings())))
    assert main(["fail", "Pi(4,32)"]) == 0
    text = capsys.readouterr().out
    assert f"{doc['single_links']['failures']} in {doc['single_links']['orbits']} orbits" in text
    assert f"worst  {doc['single_nodes']['worst']['failure']:>12}: T_L" in text


def test_robust_search_column_is_the_worst_single_failure_and_can_rank():
    result = api.search(16, 2, jobs=1, robust=True, rank_by_robust=True)
    worst = []
    for p in result.frontier:
        doc = api.fail(p.expr)
        rows = [doc["single_links"]["worst"], doc["single_nodes"]["worst"]]
        t = max(r.get("allreduce_s", float("inf")) for r in rows)
        assert p.robust.get("worst_allreduce_s", float("inf")) == pytest.approx(t)
        worst.append(t)
    assert result.recommended == min(range(len(worst)), key=worst.__getitem__)


def test_spare_on_the_dead_nodes_panel_moves_one_cord_per_fibre():
    """C(16,{1,6}) on 48-port panels: node 15 shares its panel with spares 16, 17. Moving its
    2d = 8 fibres to a spare there re-plugs one cord per fibre (its trunk end stays), so
    8 unplugged + 8 plugged; a spare on another panel moves both cords of every fibre."""
    g = api.load("C(16,{1,6})")
    plan = api.spare(g, 15, 10, panel_size=48)
    lay = plan.before.layout
    assert lay.panel_of(plan.spare) == lay.panel_of(15)
    assert plan.costs[plan.spare] == min(c for c in plan.costs.values() if c is not None) == 16
    assert all(c == 32 for s, c in plan.costs.items() if lay.panel_of(s) != lay.panel_of(15))
    # the cords after the move realise the intact fibres with the spare playing node 15
    rename = lambda v: plan.spare if v == 15 else v        # noqa: E731
    before = sorted((rename(u), p, rename(w), q) for u, p, w, q in plan.before.trace())
    assert sorted(plan.after.trace()) == before
    assert main(["fail", "C(16,{1,6})", "--repatch", "15", "--spares", "10", "--panel-size",
                 "48"]) == 0
