"""Hierarchical clusters: composed fabric shape and ForestColl's optimum against the cut
bounds one can write down by hand."""

import pytest

from topofinder.errors import TopofinderError
from topofinder.scoring.trees.forestcoll import throughput_optimum
from topofinder.families import circulant, complete
from topofinder.workload.hierarchy import compose, hierarchical_score


def test_composed_fabric_shape():
    topo = compose(complete(5), 8, "NVSwitch 300GB/s", "400Gbps")
    assert topo.num_compute == 40 and topo.switches.size == 5
    assert topo.capacity_unit == "Gbps"                       # 100 Gbps links, 2400 Gbps NVLink
    assert topo.node_bandwidth == 2400 + 100                  # GPU 0 of a server holds a port


def test_server_cut_bounds_the_gpu_allgather():
    """K(5) servers of 8 GPUs, 4 ports of 100 Gbps: all servers but one (32 GPUs) send into
    the last server's 400 Gbps = 50 GB/s, so algbw = N / ratio* = 40 · 50 / 32 = 62.5 GB/s."""
    score = hierarchical_score(complete(5), 8, "NVSwitch 300GB/s", "400Gbps")
    assert score["hier_algbw_GBps"] == pytest.approx(62.5)
    assert score["hier_cut_gpus"] == 32


def test_mesh_intra_and_bad_spec():
    topo = compose(circulant(8, [1, 2]), 4, "mesh 50GB/s", "200GB/s")
    assert not topo.has_switches and topo.num_compute == 32
    assert throughput_optimum(topo).ratio > 0
    with pytest.raises(TopofinderError, match="--intra"):
        compose(complete(5), 8, "crossbar 1GB/s", "400Gbps")
