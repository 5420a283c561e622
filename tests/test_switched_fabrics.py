"""Switched and heterogeneous fabrics (paper 002 §4, §5.3, App. E.2): the optimum over compute
nodes against brute force over all cuts, the six example fabrics of paper 002 §6.2 against
the published optima, edge splitting keeping the optimum (Thm 6), trees with routes through
switches that validate at the optimum, and honest units (one fabric written three ways)."""

import os
import random
from fractions import Fraction

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.model.files import read_topology, topology_text
from topofinder.scoring.trees.forestcoll import (
    fixed_k_optimum, fixed_k_trees, optimal_trees, throughput_optimum, tree_parameters,
)
from topofinder.finder.describe import describe
from topofinder.scoring.trees.switch_split import split_switches
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import TreeSchedule, Tree, problems, validate

DATA = os.path.join(os.path.dirname(__file__), "data")

# paper 002 / the public ForestColl code: optimal allgather time · N / M in s/GB (GB/s links)
EXAMPLES = {"mi250_1": Fraction(7, 150), "mi250_2": Fraction(15, 166),
            "mi250_4": Fraction(3, 16), "a100_1": Fraction(7, 300),
            "a100_2": Fraction(3, 65), "a100_4": Fraction(3, 25)}


def brute_ratio(topo) -> Fraction:
    """max |S ∩ V_c| / C⁺(S) over every S ⊉ V_c with a compute node (optimality (⋆))."""
    m = topo.link_matrix.tocoo()
    n = topo.n
    masks = np.arange(1, 2 ** n - 1)
    cuts = ((masks[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
    comp = ~topo.is_switch
    inside = cuts[:, comp].sum(axis=1)
    ok = (inside > 0) & (inside < comp.sum())
    exiting = (cuts[:, m.row] & ~cuts[:, m.col]) @ m.data.astype(np.int64)
    return max(Fraction(int(a), int(c)) for a, c in zip(inside[ok], exiting[ok]))


def random_switched(rng, n):
    """A random connected bidirectional fabric with capacities 1..4 and some switches."""
    order = list(range(n))
    rng.shuffle(order)
    pairs = {(order[rng.randrange(i)], order[i]) for i in range(1, n)}
    for _ in range(rng.randint(0, n)):
        pairs.add(tuple(rng.sample(range(n), 2)))
    src, dst, cap = [], [], []
    for a, b in pairs:
        c = rng.randint(1, 4)
        src += [a, b]
        dst += [b, a]
        cap += [c, c]
    switches = rng.sample(range(n), rng.randint(1, n - 3))
    return Topology(n, src, dst, capacity=cap, switches=switches)


def test_optimum_and_trees_on_random_switched_fabrics():
    rng = random.Random(7)
    for _ in range(60):
        topo = random_switched(rng, rng.randint(4, 9))
        opt = throughput_optimum(topo)
        assert opt.ratio == brute_ratio(topo)
        assert opt.tau == Fraction(topo.node_bandwidth, topo.num_compute) * opt.ratio
        sched = optimal_trees(topo, optimum=opt)
        assert problems(sched, opt.tau) == []
        assert sched.tau() == opt.tau


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_forestcoll_example_fabrics(name):
    topo = read_topology(os.path.join(DATA, f"{name}.edges"))
    assert topo.capacity_unit == "GB/s"
    assert topo.num_compute == (16 if name.startswith("mi250") else 8) * int(name[-1])
    opt = throughput_optimum(topo)
    assert opt.ratio == EXAMPLES[name]
    if name == "mi250_4":
        return                                  # its trees: test_forestcoll_mi250_4_trees
    sched = optimal_trees(topo, optimum=opt)
    validate(sched, opt.tau)
    assert sched.tau() == opt.tau
    if name == "a100_1":                   # one NVSwitch split evenly: every tree is a star
        assert max(sched.heights()) == 1


@pytest.mark.slow
def test_forestcoll_mi250_4_trees():
    topo = read_topology(os.path.join(DATA, "mi250_4.edges"))
    opt = throughput_optimum(topo)
    sched = optimal_trees(topo, optimum=opt)
    validate(sched, opt.tau)
    assert sched.tau() == opt.tau


def test_edge_splitting_keeps_the_optimum():
    """G* (compute nodes only, capacities in tree slots) has the same optimum: its ratio is
    ratio*/U, i.e. k trees per root still fit (Thm 5–6), checked by an independent optimum."""
    topo = read_topology(os.path.join(DATA, "a100_2.edges"))
    opt = throughput_optimum(topo)
    params = tree_parameters(topo, opt)
    m = topo.link_matrix.tocoo()
    slots = m.data * params.U.numerator // params.U.denominator
    links = {(int(u), int(w)): int(c) for u, w, c in zip(m.row, m.col, slots)}
    logical, _ = split_switches(topo.n, topo.compute_nodes, topo.switches, links, params.k)
    index = {int(c): i for i, c in enumerate(topo.compute_nodes)}
    src, dst, cap = [], [], []
    for (u, w), paths in logical.items():
        assert all(p[0] == u and p[-1] == w and all(topo.is_switch[x] for x in p[1:-1])
                   for p, _ in paths)
        src.append(index[u])
        dst.append(index[w])
        cap.append(sum(c for _, c in paths))
    star = Topology(topo.num_compute, src, dst, capacity=cap)
    assert throughput_optimum(star).ratio == opt.ratio / params.U


def test_routes_are_checked():
    topo = read_topology(os.path.join(DATA, "a100_1.edges"))
    sched = optimal_trees(topo)
    t0 = sched.trees[0]
    (edge, paths), = t0.routes[:1]
    bad = Tree(t0.root, t0.weight, t0.edges,
               [(edge, [((edge[0], edge[1]), t0.weight)])] + list(t0.routes[1:]))
    assert any("missing link" in p or "not a link" in p
               for p in problems(TreeSchedule(topo, (bad,) + sched.trees[1:])))
    back = TreeSchedule.from_json(sched.to_json(), topo)
    assert problems(back, sched.tau()) == []


FABRIC = [(0, 1, 4), (1, 2, 2), (2, 3, 1), (3, 0, 2), (0, 2, 1)]     # duplex links


def _write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join(f"{u} {w} {c}\n" for u, w, c in rows))
    return str(path)


def test_one_fabric_written_three_ways_scores_identically(tmp_path):
    duplex = [(u, w, c) for a, b, c in FABRIC for u, w in ((a, b), (b, a))]
    capacities = _write(tmp_path, "caps.txt", duplex)
    repeated = tmp_path / "repeated.txt"
    repeated.write_text("".join(f"{u} {w}\n" * c for u, w, c in duplex))
    gbs = _write(tmp_path, "gbs.txt", [(u, w, f"{50 * c}GB/s") for u, w, c in duplex])
    infos = [describe(read_topology(p)) for p in (capacities, str(repeated), gbs)]
    assert infos[2]["B"] == "350 GB/s" and infos[0]["B"] == "7 b"
    for key in ("tau_fc_exact", "tau_opt_exact", "tau_bfb_exact", "bw_optimal",
                "fc_optimal_is_bound", "bottleneck_cut_size"):
        assert infos[0][key] == infos[1][key] == infos[2][key], key
    # B = 7 (node 0: 4 + 2 + 1), min B⁻ = 3 (node 3: 1 + 2): bound (N-1)/N · B / min B⁻
    assert infos[0]["tau_opt_exact"] == "7/4"


def test_switch_markers_in_every_format(tmp_path):
    topo = read_topology(os.path.join(DATA, "a100_1.edges"))
    assert topo.num_compute == 8 and topo.switches.size == 1
    for fmt in ("edgelist", "json", "graphml"):
        path = tmp_path / f"t.{fmt}"
        path.write_text(topology_text(topo, fmt))
        back = read_topology(str(path))
        assert back.same_arcs(topo)
        assert back.switches.tolist() == topo.switches.tolist()
        assert back.capacity_unit == "GB/s"


@pytest.mark.parametrize("text, message", [
    ("switch 9\n0 1\n1 0\n", "appears on no arc"),
    ("0 1 5GB/s\n1 0 3\n", "carry a bandwidth unit"),
    ("0 1 5furlongs\n1 0 5furlongs\n", "unknown bandwidth"),
    # node bandwidth caps (issue 30): refused in one line naming the file and line
    ("0 1\n1 0\nnode_bandwidth 0\n", ":3: node_bandwidth must be a positive number"),
    ("0 1\nnode_bandwidth -2\n1 0\n", ":2: node_bandwidth must be a positive number"),
    ("node_bandwidth fast\n0 1\n1 0\n", ":1: node_bandwidth must be a positive number"),
    ("node_bandwidth 3 4\n0 1\n1 0\n", ":1: expected one 'node_bandwidth B' line"),
    ("node_bandwidth 3\nnode_bandwidth 4\n0 1\n1 0\n", ":2: expected one"),
    ("node_bandwidth 3/0\n0 1\n1 0\n", ":1: node_bandwidth must be"),
    ("node_bandwidth 3GB/s\n0 1\n1 0\n", "carries a unit but the capacities do not"),
    ("node_bandwidth 3\n0 1 1GB/s\n1 0 1GB/s\n", "give node_bandwidth one too"),
])
def test_bad_switch_or_unit_input(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(TopofinderError, match=message) as exc:
        read_topology(str(path))
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def test_gbps_and_gbs_mix_to_one_unit(tmp_path):
    path = _write(tmp_path, "mix.txt", [(0, 1, "25GB/s"), (1, 0, "100Gbps")])
    topo = read_topology(path)
    assert topo.capacity_unit == "Gbps" and sorted(topo.arc_capacity) == [100, 200]


@pytest.mark.parametrize("k, algbw", [(1, 320), (2, 341), (3, 343), (5, 348)])
def test_fixed_k_mi250_2_matches_paper_table_1(k, algbw):
    """Paper 002 Table 1 (2-box MI250, fixed k): algbw = M / T = B / τ, rounded to GB/s."""
    topo = read_topology(os.path.join(DATA, "mi250_2.edges"))
    best = fixed_k_optimum(topo, k)
    assert round(topo.node_bandwidth / best.tau) == algbw
    if k <= 2:
        sched = fixed_k_trees(topo, k)
        assert problems(sched, best.tau) == [] and sched.tau() == best.tau


def test_unbalanced_switch_and_step_export_are_user_errors(tmp_path, capsys):
    from topofinder.cli.main import main

    path = tmp_path / "unbalanced.txt"          # switch S: 3 in, 2 out (not Eulerian)
    path.write_text("switch S\n0 S 2\nS 1 1\n1 0 1\n0 1 1\n1 S 1\nS 0 1\n")
    topo = read_topology(str(path))
    with pytest.raises(TopofinderError, match="Eulerian|ingress and egress"):
        optimal_trees(topo)
    assert main(["export", os.path.join(DATA, "a100_1.edges"), "--what", "schedule"]) == 2
    assert "switch nodes" in capsys.readouterr().err
