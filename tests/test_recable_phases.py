"""Phase plans (issue 38): the chosen plan's cycle time is the least found by brute force over
every assignment of the search's candidates to the phases."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import jsonschema

import pytest

from topofinder import api
from topofinder.cabling.patch_panel import diff_plans, plan_patch_panel
from topofinder.cli.main import main
from topofinder.families.build import load_topology
from topofinder.resilience.phases import load_phases

PHASES = """operations = {ops}
[network]
alpha = "10us"
bandwidth = "100Gbps"
[reconfiguration]
{switch}
[[phase]]
name = "bulk"
share = 0.5
size = "64MB"
[[phase]]
name = "latency"
share = 0.5
size = "1KB"
"""


def _brute(result, spec):
    pts = result.frontier

    def per_op(p, w):
        return w.collective_time(p.allreduce_T_L, p.allreduce_tau)

    def switch(a, b):
        if a == b:
            return 0.0
        if spec.switch_s is not None:
            return spec.switch_s
        old = plan_patch_panel(load_topology(pts[a].expr))
        return diff_plans(old, load_topology(pts[b].expr)).removed.shape[0] * spec.per_move_s

    best = float("inf")
    for assign in itertools.product(range(len(pts)), repeat=len(spec.phases)):
        t = sum(s * spec.operations * per_op(pts[c], w)
                for c, (_, s, w) in zip(assign, spec.phases))
        t += sum(switch(assign[i], assign[(i + 1) % len(assign)]) for i in range(len(assign)))
        best = min(best, t)
    return best


@pytest.mark.parametrize("switch,ops", [('cost = "10us"', 1000), ('cost = "10s"', 1000),
                                        ('per_move = "1ms"', 100), ('per_move = "2min"', 10)])
def test_chosen_plan_is_the_brute_force_minimum(tmp_path, switch, ops):
    path = tmp_path / "phases.toml"
    path.write_text(PHASES.format(ops=ops, switch=switch))
    r = api.search(16, 4, phases=path, jobs=1)
    jsonschema.validate(r.to_dict(), json.loads((Path(api.__file__).parents[1] / "schemas" /
                                                 "search.schema.json").read_text()))
    assert len(r.frontier) >= 2                      # a real choice between fabrics
    ph = r.phases
    chosen = min(ph["single"]["cycle_s"], ph["per_phase"]["cycle_s"])
    assert chosen == pytest.approx(_brute(r, load_phases(path)), rel=1e-12)
    if ph["break_even_operations"] is not None:
        assert (ph["choice"] == "per_phase") == (ops > ph["break_even_operations"])


def test_cheap_switch_takes_a_fabric_per_phase(tmp_path, capsys):
    path = tmp_path / "phases.toml"
    path.write_text(PHASES.format(ops=1000, switch='cost = "10us"'))
    assert main(["search", "--n", "16", "--d", "4", "--phases", str(path),
                 "--no-baselines", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "answer: one per phase" in out and "pay from" in out


@pytest.mark.parametrize("bad", ["[[phase]]\nshare = 1\n", "[reconfiguration]\ncost='1s'\n",
                                 "[reconfiguration]\ncost='1s'\n[[phase]]\nshare = -1\n",
                                 "[reconfiguration]\ncost='1s'\nper_move='1s'\n[[phase]]\n"
                                 "share = 1\n"])
def test_bad_phase_files(tmp_path, capsys, bad):
    path = tmp_path / "p.toml"
    path.write_text(bad)
    assert main(["search", "--n", "16", "--d", "4", "--phases", str(path)]) == 2
    assert "phases" in capsys.readouterr().err
