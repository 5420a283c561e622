"""Re-cabling in waves (issue 38): every wave's fabric strongly connected with at most d ports
per node, its stated scores equal `score` of its exported topology, its schedule passes
`check` against its plan, the waves add up to the diff."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from topofinder import api
from topofinder.cabling.check import apply_diff
from topofinder.cabling.patch_panel import diff_plans, plan_patch_panel, read_plan
from topofinder.cli.main import main
from topofinder.families.build import load_topology
from topofinder.resilience.waves import blockers, plan_waves


def _arcs(plan):
    s, t = plan.arcs()
    return Counter(zip(s.tolist(), t.tolist()))


@pytest.mark.parametrize("old,new,waves", [
    ("C(16,{1,6})", "C(16,{3,4})", 3), ("C(16,{1,6})", "Torus(4,4)", 2),
    ("L(C(4,{1,2}))", "L(C(4,{1,3}))", 4), ("C(24,{1,5})", "C(24,{1,7})", 4)])
def test_waves_keep_the_fabric_up(old, new, waves):
    diff = diff_plans(plan_patch_panel(load_topology(old)), load_topology(new))
    plan = plan_waves(diff, waves, failures=False)
    d = load_topology(new).degree
    assert sorted(set(plan.removed_wave.tolist())) <= list(range(1, waves + 1))
    # a plugged row never goes in before the rows that held its ends
    for a, b in zip(plan.added_wave.tolist(), blockers(diff)):
        assert all(plan.removed_wave[j] <= a for j in b)
    for s in plan.stats:
        assert "disconnects" not in s["during"] and "disconnects" not in s["after"]
        assert s["max_ports"] <= d
    for i in range(waves + 1):
        after = plan.plan_after(i)
        assert after.to_topology().strongly_connected
        assert int(after.rows[:, [3, 5]].max()) < d
    assert _arcs(plan.plan_after(0)) == _arcs(diff.old)
    assert _arcs(plan.plan_after(waves)) == _arcs(diff.new)
    worst = max(s["during"]["allreduce_s"] for s in plan.stats)
    assert plan.lower_bound_s <= worst


def test_max_down_bounds_every_wave():
    diff = diff_plans(plan_patch_panel(load_topology("C(24,{1,5})")),
                      load_topology("C(24,{1,7})"))
    plan = plan_waves(diff, max_down=5, failures=False, stats=False)
    counts = np.bincount(plan.removed_wave)
    assert counts.max() <= 5 and plan.waves == -(-diff.removed.shape[0] // 5)


def test_cli_waves_score_and_check(tmp_path, capsys):
    old, d = tmp_path / "old.csv", tmp_path / "d.csv"
    assert main(["export", "C(16,{1,6})", "--what", "patch-panel", "-o", str(old)]) == 0
    assert main(["export", "C(16,{3,4})", "--what", "patch-panel", "--diff", str(old),
                 "--waves", "3", "-o", str(d)]) == 0
    err = capsys.readouterr().err
    stated = {}
    for line in err.splitlines():
        if line.startswith("wave ") and "after: T_L" in line:
            wave = int(line.split(":")[0].split()[1])
            after = line.split("after: ")[1]
            stated[wave] = (int(after.split("T_L ")[1].split(",")[0]),
                            after.split("tau ")[1].split(",")[0])
    assert sorted(stated) == [1, 2, 3]
    assert "worst allreduce while a wave is out" in err
    header = d.read_text().splitlines()[0]
    assert header.startswith("action,wave,panel,")
    # the wave CSV applies to the old plan like the plain diff
    after = apply_diff(read_plan(old), d)
    assert _arcs(after) == _arcs(api.diff_patch_panel(old, "C(16,{3,4})").new)
    for i in (1, 2, 3):
        topo, plan, sched = (tmp_path / f"w{i}.edges", tmp_path / f"w{i}.csv",
                             tmp_path / f"w{i}.json")
        base = ["export", "C(16,{3,4})", "--diff", str(old), "--waves", "3", "--wave", str(i)]
        assert main(base + ["--what", "topology", "-o", str(topo)]) == 0
        assert main(base + ["--what", "patch-panel", "-o", str(plan)]) == 0
        assert main(base + ["--what", "schedule", "-o", str(sched)]) == 0
        s = api.score(str(topo))
        assert (s["T_L"], s["tau_bfb_exact"]) == stated[i]
        assert main(["check", str(plan), str(sched)]) == 0
        assert _arcs(read_plan(plan)) == Counter(zip(api.load(str(topo)).src.tolist(),
                                                     api.load(str(topo)).dst.tolist()))


def test_wave_options_need_diff(tmp_path, capsys):
    assert main(["export", "C(16,{1,6})", "--waves", "2"]) == 2
    assert "need --diff" in capsys.readouterr().err
    old = tmp_path / "old.csv"
    assert main(["export", "C(16,{1,6})", "--what", "patch-panel", "-o", str(old)]) == 0
    assert main(["export", "C(16,{3,4})", "--diff", str(old), "--wave", "1"]) == 2
    assert "--waves W" in capsys.readouterr().err
    assert main(["export", "C(16,{3,4})", "--what", "patch-panel", "--diff", str(old),
                 "--waves", "2", "--wave", "5"]) == 2
    assert "waves 1..2" in capsys.readouterr().err


@pytest.mark.slow
def test_waves_at_1024():
    """N = 1024, d = 4 (duplex circulant re-balanced, 1024 of 2048 cables move) in 4 waves:
    every wave connected, the worst allreduce while a wave is out at most the old fabric's
    with that wave's fibres failed."""
    diff = diff_plans(plan_patch_panel(load_topology("C(1024,{1,5})")),
                      load_topology("C(1024,{1,7})"), method="heuristic")
    plan = plan_waves(diff, 4, failures=False)
    for s in plan.stats:
        assert "disconnects" not in s["during"] and s["max_ports"] <= 4
    worst = max(s["during"]["allreduce_s"] for s in plan.stats)
    assert plan.lower_bound_s <= worst <= max(s["old_with_wave_failed"]["allreduce_s"]
                                              for s in plan.stats)
