"""The command line and the Python API answer the same question identically: `search`,
`score` and `export` output against the API's result for the same inputs, each JSON document
validated against its shipped schema."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import topofinder as tf
from topofinder.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def _schema(name: str) -> dict:
    return json.loads((files("topofinder") / "schemas" / name).read_text())


def _cli(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def _moe_file(tmp_path, alpha: str, bandwidth: str) -> Path:
    """search/moe.toml with its [network] table set to ``alpha`` and ``bandwidth``."""
    text = (ROOT / "search" / "moe.toml").read_text()
    text = text.replace('alpha = "10us"', f'alpha = "{alpha}"')
    text = text.replace('bandwidth = "100Gbps"', f'bandwidth = "{bandwidth}"')
    path = tmp_path / "moe.toml"
    path.write_text(text)
    return path


def test_score_cli_equals_api_for_a_file(tmp_path, capsys):
    path = tmp_path / "ring.txt"
    path.write_text("0 1\n1 2\n2 3\n3 4\n4 0\n")
    cli = json.loads(_cli(capsys, "score", str(path), "--undirected", "--json"))
    topo = tf.load(str(path), undirected=True)
    api = {**tf.score(topo), **tf.collective_prices(topo, tf.Workload())}
    assert cli == json.loads(json.dumps(api))
    jsonschema.validate(cli, _schema("score.schema.json"))
    assert cli["d"] == 2 and cli["diameter"] == 2          # the undirected 5-cycle


def test_search_cli_equals_api(capsys):
    cli = json.loads(_cli(capsys, "search", "--n", "16", "--d", "2", "--jobs", "1",
                          "--no-cache", "--size", "64MB", "--json"))
    w = tf.Workload.from_strings(size="64MB")
    api = tf.search(16, 2, w, jobs=1, use_cache=False, baselines=True).to_dict()
    assert cli == json.loads(json.dumps(api))
    jsonschema.validate(cli, _schema("search.schema.json"))


def test_search_takes_the_workload_files_network_in_cli_and_api(tmp_path, capsys):
    """The MoE file's [network] α and bandwidth win over the defaults, in both front ends; the
    hierarchy is composed at that bandwidth (the same as giving it with --bandwidth)."""
    moe = _moe_file(tmp_path, "20us", "50Gbps")
    cli = json.loads(_cli(capsys, "search", "--n", "16", "--d", "2", "--jobs", "1",
                          "--no-cache", "--no-baselines", "--workload", str(moe),
                          "--gpus-per-node", "2", "--json"))
    api = tf.search(16, 2, jobs=1, use_cache=False, moe=moe, gpus_per_node=2).to_dict()
    assert cli == json.loads(json.dumps(api))
    jsonschema.validate(cli, _schema("search.schema.json"))
    assert cli["workload"]["alpha_s"] == pytest.approx(20e-6)
    assert cli["workload"]["bandwidth_Bps"] == pytest.approx(50e9 / 8)
    plain = tf.search(16, 2, tf.Workload.from_strings(alpha="20us", bandwidth="50Gbps"),
                      jobs=1, use_cache=False, gpus_per_node=2)
    for p, q in zip(cli["frontier"], plain.to_dict()["frontier"]):
        assert p["expr"] == q["expr"]
        assert (p["hier_algbw_GBps"], p["gpu_bandwidth"]) == (q["hier_algbw_GBps"],
                                                            q["gpu_bandwidth"])
    # 2 GPUs per server behind a 300 GB/s switch, d = 2 server links of 25 Gbps each: every
    # GPU has 300 GB/s + 25 Gbps = 2425 Gbps
    assert cli["frontier"][0]["gpu_bandwidth"] == "2425 Gbps"


@pytest.mark.parametrize("collective, kind", [("allreduce", "steps"), ("allgather", "trees"),
                                              ("alltoall", "steps")])
def test_export_schedule_json_cli_equals_api(collective, kind, tmp_path, capsys):
    out = tmp_path / "s.json"
    _cli(capsys, "export", "C(16,{1,6})", "--what", "schedule", "--collective", collective,
         "--kind", kind, "-o", str(out))
    api = tf.export_schedule(tf.schedule("C(16,{1,6})", collective, kind))
    assert out.read_text() == api
    jsonschema.validate(json.loads(api), _schema("schedule.schema.json"))


def test_export_schedule_xml_and_npz_cli_equal_api(tmp_path, capsys):
    xml = _cli(capsys, "export", "Torus(4,4)", "--what", "schedule", "--format", "xml",
               "--channels", "2")
    sched = tf.schedule("Torus(4,4)")
    assert xml == tf.export_schedule(sched, "xml", channels=2)
    cli, api = tmp_path / "cli.npz", tmp_path / "api.npz"
    _cli(capsys, "export", "Torus(4,4)", "--what", "schedule", "--format", "npz", "-o", str(cli))
    tf.export_schedule(sched, "npz", api)
    with np.load(cli) as a, np.load(api) as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            assert np.array_equal(a[key], b[key]), key
    with pytest.raises(tf.TopofinderError, match="binary"):
        tf.export_schedule(sched, "npz")


@pytest.mark.parametrize("what, fmt", [("topology", "edgelist"), ("topology", "json"),
                                       ("ranks", "hostfile")])
def test_export_files_cli_equal_api(what, fmt, capsys):
    cli = _cli(capsys, "export", "L(K(3,3))", "--what", what, "--format", fmt)
    write = tf.export_topology if what == "topology" else tf.export_ranks
    assert cli == write("L(K(3,3))", fmt)


def test_export_patch_panel_diff_cli_equals_api(tmp_path, capsys):
    old = tmp_path / "old.csv"
    _cli(capsys, "export", "C(16,{1,6})", "--what", "patch-panel", "-o", str(old))
    assert old.read_text() == tf.export_patch_panel("C(16,{1,6})").to_csv()
    diff = tmp_path / "diff.csv"
    _cli(capsys, "export", "C(16,{1,4})", "--what", "patch-panel", "--diff", str(old),
         "-o", str(diff))
    api = tf.diff_patch_panel(old, "C(16,{1,4})")
    api.write_csv(tmp_path / "api.csv")
    api.write_mapping(tmp_path / "api-mapping.csv")
    assert diff.read_text() == (tmp_path / "api.csv").read_text()
    assert (tmp_path / "diff-mapping.csv").read_text() == \
        (tmp_path / "api-mapping.csv").read_text()
    # renamed by the diff's mapping, the new topology's schedule rides the new plan's fibres
    sched = tf.relabel(tf.schedule("C(16,{1,4})"), tmp_path / "api-mapping.csv")
    tf.export_schedule(sched, "json", tmp_path / "s.json",
                       physical=tf.mapping(tmp_path / "api-mapping.csv").physical)
    report = tf.check_schedule(old, tmp_path / "s.json", diff)
    assert report.sends == sched.num_sends


def test_cross_connects_cli_equal_api(tmp_path, capsys):
    _cli(capsys, "export", "Torus(4,4)", "--what", "cross-connects", "--panel-size", "32",
         "-o", str(tmp_path / "cli.csv"))
    cc, diff = tf.export_cross_connects("Torus(4,4)", 32)
    assert diff is None
    cc.write_csv(tmp_path / "api.csv")
    assert (tmp_path / "cli.csv").read_text() == (tmp_path / "api.csv").read_text()
    # 16 nodes of 4 ports, two port ends each: 128 ends on panels of 32 ports → 4 panels
    assert cc.layout.panels * cc.layout.per_panel >= 16 and cc.layout.panels >= 4


def test_the_package_re_exports_the_whole_api():
    import topofinder.api
    assert set(topofinder.api.__all__) <= set(dir(tf))
    for name in topofinder.api.__all__:
        assert getattr(tf, name) is getattr(topofinder.api, name), name
