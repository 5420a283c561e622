"""OCS tables (issue 38): SONiC CONFIG_DB JSON and Polatis-style NETCONF read back as the
plan they were written from; every port once per state; hostile names stay inert."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from topofinder.cabling.ocs import (
    fibres, netconf_text, parse_netconf, parse_ocs, parse_sonic, sonic_config, sonic_text,
)
from topofinder.cabling.patch_panel import plan_patch_panel
from topofinder.cli.main import main
from topofinder.families.build import load_topology

HOSTILE = ['a"b', "<x>&y", "</port-label><pair/>", "]]>--", "{'k': 1}", "x\\\"y",
           "é ü", "z:9:tx"]


def _arcs(plan):
    return Counter((u, w) for u, _, w, _ in fibres(plan))


@pytest.mark.parametrize("expr", ["C(8,{1,3})", "Kautz(2,3)", "Torus(2,4)", "L(C(4,{1,2}))"])
def test_both_formats_round_trip(expr):
    plan = plan_patch_panel(load_topology(expr))
    d = load_topology(expr).degree
    cfg = sonic_config(plan, d)
    ports = cfg["OCS_PORT"]
    assert len(ports) == 2 * plan.n * d                          # every port once
    used = Counter(p for c in cfg["OCS_CROSS_CONNECT"].values() for p in c.values())
    assert max(used.values()) == 1                                # at most one pair a port
    assert all(ports[p]["state"] == "normal" for p in used)
    assert _arcs(parse_sonic(sonic_text(plan, d))) == _arcs(plan)
    assert _arcs(parse_netconf(netconf_text([plan], d))) == _arcs(plan)


def test_hostile_names_stay_inert():
    plan = replace(plan_patch_panel(load_topology("C(8,{1,3})")), labels=tuple(HOSTILE))
    for text, parse in ((sonic_text(plan), parse_sonic), (netconf_text([plan]), parse_netconf)):
        back = parse(text)
        assert back.labels == tuple(HOSTILE) and _arcs(back) == _arcs(plan)
    xml = netconf_text([plan])
    assert "</port-label><pair/>" not in xml and "&lt;x&gt;&amp;y" in xml
    assert json.loads(sonic_text(plan))["OCS_PORT"]["1A"]["label"] == 'a"b:0:tx'


def test_netconf_steps_delete_then_create():
    old = plan_patch_panel(load_topology("C(8,{1,2})"))
    new = plan_patch_panel(load_topology("C(8,{1,3})"))
    xml = netconf_text([old, new])
    step1 = xml.split('step="1"')[1]
    assert step1.index('operation="delete"') < step1.index('operation="create"')
    assert _arcs(parse_netconf(xml)) == _arcs(new)


@pytest.mark.parametrize("bad", ['{"OCS_PORT": 3, "OCS_CROSS_CONNECT": {}}',
                                 '<?xml version="1.0"?><edit-configs nodes="x"/>',
                                 '<edit-configs nodes="2" ports-per-node="1"><bad'])
def test_bad_tables_are_one_line_errors(bad):
    from topofinder.errors import TopofinderError
    with pytest.raises(TopofinderError):
        parse_ocs(bad, "t")


def test_cli_waves_and_check(tmp_path, capsys):
    old = tmp_path / "old.csv"
    assert main(["export", "C(16,{1,6})", "--what", "patch-panel", "-o", str(old)]) == 0
    for i in (1, 2):
        s, x, sched = tmp_path / f"s{i}.json", tmp_path / f"n{i}.xml", tmp_path / f"w{i}.json"
        base = ["export", "C(16,{3,4})", "--diff", str(old), "--waves", "2", "--wave", str(i)]
        assert main(base + ["--what", "cross-connects", "--format", "sonic-ocs", "-o",
                            str(s)]) == 0
        assert main(base + ["--what", "cross-connects", "--format", "netconf", "-o",
                            str(x)]) == 0
        assert main(base + ["--what", "schedule", "-o", str(sched)]) == 0
        assert main(["check", str(s), str(sched)]) == 0
        assert main(["check", str(x), str(sched)]) == 0


def test_cli_refuses_unknown_formats_and_csv_waves(tmp_path, capsys):
    assert main(["export", "C(8,{1,3})", "--what", "cross-connects", "--format", "bogus"]) == 2
    assert "accepted are csv, sonic-ocs, netconf" in capsys.readouterr().err
    old = tmp_path / "old.csv"
    assert main(["export", "C(8,{1,2})", "--what", "patch-panel", "-o", str(old)]) == 0
    assert main(["export", "C(8,{1,3})", "--what", "cross-connects", "--diff", str(old),
                 "--waves", "2"]) == 2
    assert "need --format sonic-ocs or netconf" in capsys.readouterr().err
