"""The Chakra / ASTRA-sim export (topofinder.export.chakra) read back with the protobuf
package: sends and receives pair one to one, every transfer on a cabled link, the bytes are
the schedule's, the dependencies are those the schedule implies."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

from topofinder import api                                          # noqa: E402
from topofinder.cli.main import main                                # noqa: E402
from topofinder.export.chakra import (COMM_RECV_NODE, COMM_SEND_NODE, messages,  # noqa: E402
                                      read_delimited)

MB = 2 ** 20


def read_rank(path: Path) -> tuple:
    meta_cls, node_cls = messages()
    data = path.read_bytes()
    meta, pos = read_delimited(data, meta_cls)
    nodes = []
    while pos < len(data):
        node, pos = read_delimited(data, node_cls, pos)
        nodes.append(node)
    assert pos == len(data)
    return meta, nodes


def attrs(node) -> dict:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}


def test_circulant_allgather_bundle(tmp_path):
    out = tmp_path / "astra"
    assert main(["export", "C(16,{1,6})", "--what", "schedule", "--format", "chakra", "-o",
                 str(out), "--alpha", "1us"]) == 0
    sched = api.schedule("C(16,{1,6})")
    topo = sched.topology
    arcs = set(zip(topo.src.tolist(), topo.dst.tolist()))
    sends, recvs = Counter(), Counter()
    total = 0
    for rank in range(16):
        meta, nodes = read_rank(out / f"allgather.{rank}.et")
        assert meta.version
        ids = {n.id for n in nodes}
        assert len(ids) == len(nodes)
        for n in nodes:
            a = attrs(n)
            assert (a["comm_src"], a["comm_dst"]) in arcs          # a cabled link
            assert set(n.data_deps) <= ids and set(n.ctrl_deps) <= ids
            key = (a["comm_src"], a["comm_dst"], a["comm_tag"], a["comm_size"])
            if n.type == COMM_SEND_NODE:
                assert a["comm_src"] == rank
                sends[key] += 1
                total += a["comm_size"]
            else:
                assert n.type == COMM_RECV_NODE and a["comm_dst"] == rank
                recvs[key] += 1
    assert sends == recvs and max(sends.values()) == 1               # one to one
    assert sum(sends.values()) == sched.num_sends
    # the schedule's bytes: every node receives the N − 1 other shards of M/N
    assert total == 15 * MB == int(np.sum((sched.sends[:, 3] - sched.sends[:, 2])
                                          * MB // (16 * sched.shard_chunks)))
    system = json.loads((out / "system.json").read_text())
    assert system["all-gather-implementation-custom"] == [str(out.resolve() / "allgather")]
    net = (out / "network.yml").read_text()
    assert "npus_count: [ 16 ]" in net and "latency: [ 1000.0 ]" in net
    b = 100e9 / 8 / 4 / 2 ** 30                                      # b = B/d in 2^30 B/s
    assert f"bandwidth: [ {b!r} ]" in net
    meta, (coll,) = read_rank(out / "workload.3.et")
    assert attrs(coll)["comm_size"] == MB and attrs(coll)["comm_type"] == 2


def test_dependencies_follow_the_data(tmp_path):
    """Every send forwards only data its rank has: its data_deps' receives carry the same
    shard (by tag, the row), at earlier steps; a reduce-scatter send waits for every
    earlier partial of its chunk."""
    for collective in ("allgather", "reduce-scatter", "allreduce"):
        sched = api.schedule("Torus(3,3)", collective)
        info = api.export_chakra("Torus(3,3)", tmp_path / collective, collective,
                                 api.Workload.from_strings(size="9KB"))
        rows = sched.sends[np.lexsort(tuple(sched.sends.T[::-1]))]
        assert info["sends"] == rows.shape[0]
        for rank in range(9):
            _, nodes = read_rank(tmp_path / collective / f"{info['prefix']}.{rank}.et")
            by_id = {n.id: n for n in nodes}
            for n in nodes:
                if n.type != COMM_SEND_NODE:
                    continue
                t, v, lo, hi, u, w = rows[attrs(n)["comm_tag"]].tolist()
                got = [rows[attrs(by_id[d])["comm_tag"]] for d in n.data_deps]
                assert all(g[1] == v and g[0] < t and g[5] == u for g in got)
                reducing = collective == "reduce-scatter" or (
                    collective == "allreduce" and t <= sched.reduce_steps)
                if reducing:                       # all partials of these chunks before t
                    want = [r for r in rows if r[1] == v and r[5] == u and r[0] < t
                            and r[2] < hi and lo < r[3]]
                    assert len(got) == len(want)
                elif u != v:
                    assert got, "an allgather send forwards a chunk it never received"


def test_refusals(tmp_path):
    with pytest.raises(api.TopofinderError, match="one size"):
        api.export_chakra("C(8,{1,2})", tmp_path / "a", "allgather",
                          api.Workload.from_strings(size="1MB:0.5,2MB:0.5"))
    assert main(["export", "C(8,{1,2})", "--what", "schedule", "--format", "chakra"]) == 2
