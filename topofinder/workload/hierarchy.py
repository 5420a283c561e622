"""Hierarchical clusters: a direct-connect topology between servers composed with each server's
internal fabric, scored by ForestColl's optimum over all GPUs (paper 002 §4, switches as V_s).

Server s holds G GPUs (compute nodes s·G … s·G+G−1). Internal fabric ("intra"):
``switch BW`` / ``NVSwitch BW`` — one switch node per server, every GPU ↔ switch at BW per
direction; ``mesh BW`` — every ordered GPU pair of the server linked at BW. The server
topology's arcs become GPU-to-GPU links of b = (server bandwidth)/d each: the i-th out-port
of server s sits on GPU i mod G, the j-th in-port of server t on GPU j mod G.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.model.files import _capacity, _unify_capacities
from topofinder.scoring.trees.forestcoll import throughput_optimum
from topofinder.model.topology import MAX_NODES, Topology

INTRA_KINDS = ("switch", "nvswitch", "mesh")
_GBS = {"GB/s": Fraction(1), "Gbps": Fraction(1, 8), "MB/s": Fraction(1, 1000),
        "Mbps": Fraction(1, 8000)}


def parse_intra(spec: str) -> tuple[str, Fraction]:
    """'NVSwitch 300GB/s' → ("switch", 300 GB/s as a Fraction of GB/s)."""
    parts = spec.split()
    if len(parts) != 2 or parts[0].lower() not in INTRA_KINDS:
        raise TopofinderError(f"--intra {spec!r}: expected 'NVSwitch 300GB/s', "
                              f"'switch 300GB/s' or 'mesh 50GB/s'")
    kind = "mesh" if parts[0].lower() == "mesh" else "switch"
    bw = _capacity(parts[1], f"--intra {spec!r}")
    if not isinstance(bw, Fraction):
        raise TopofinderError(f"--intra {spec!r}: give the bandwidth with a unit (GB/s, Gbps)")
    return kind, bw


def check_gpus(servers: int, gpus: int) -> None:
    """TopofinderError unless ``servers`` servers of ``gpus`` GPUs stay within MAX_NODES."""
    if not 1 <= gpus <= MAX_NODES // max(1, servers):
        raise TopofinderError(f"--gpus-per-node must be 1..{MAX_NODES // max(1, servers)} (at "
                              f"most {MAX_NODES} GPUs in all), got {gpus}")


def compose(servers: Topology, gpus: int, intra: str, server_bandwidth: str) -> Topology:
    """The GPU-level fabric of ``servers`` (module docstring); capacities in one physical unit."""
    check_gpus(servers.n, gpus)
    kind, intra_bw = parse_intra(intra)
    total = _capacity(server_bandwidth, f"server bandwidth {server_bandwidth!r}")
    if not isinstance(total, Fraction):
        raise TopofinderError(f"server bandwidth {server_bandwidth!r} needs a unit (Gbps, GB/s)")
    n, d = servers.n, servers.degree
    b = total / d
    arcs = []
    switch_ids = []
    base_sw = n * gpus
    for s in range(n):
        g0 = s * gpus
        if kind == "switch" and gpus > 1:
            sw = base_sw + s
            switch_ids.append(sw)
            for j in range(gpus):
                arcs += [(g0 + j, sw, intra_bw), (sw, g0 + j, intra_bw)]
        elif kind == "mesh":
            arcs += [(g0 + i, g0 + j, intra_bw) for i in range(gpus) for j in range(gpus)
                     if i != j]
    out_port = np.zeros(n, np.int64)
    in_port = np.zeros(n, np.int64)
    for u, w, c in zip(servers.src.tolist(), servers.dst.tolist(),
                       servers.arc_capacity.tolist()):
        if u == w:
            continue
        arcs.append((u * gpus + int(out_port[u] % gpus), w * gpus + int(in_port[w] % gpus),
                     b * c))
        out_port[u] += 1
        in_port[w] += 1
    arcs, unit = _unify_capacities(f"{servers.expr} x {gpus} GPUs", arcs)
    total_nodes = base_sw + len(switch_ids)
    src, dst, cap = zip(*arcs)
    return Topology(total_nodes, src, dst, expr=f"{servers.expr} x {gpus} GPUs ({intra})",
                    capacity=cap, switches=switch_ids or None, capacity_unit=unit)


def hierarchical_score(servers: Topology, gpus: int, intra: str, server_bandwidth: str) -> dict:
    """ForestColl on the composed fabric: τ in M/B_GPU, the allgather algbw N/ratio* in GB/s
    (M / T with T = (M/N)·ratio*), and the bottleneck cut's GPU count."""
    topo = compose(servers, gpus, intra, server_bandwidth)
    opt = throughput_optimum(topo)
    algbw = Fraction(topo.num_compute) / opt.ratio * _GBS[topo.capacity_unit]
    return {"gpus": topo.num_compute, "gpu_bandwidth": f"{topo.node_bandwidth} "
                                                       f"{topo.capacity_unit}",
            "hier_tau_fc": float(opt.tau), "hier_algbw_GBps": float(algbw),
            "hier_cut_gpus": opt.cut_size}
