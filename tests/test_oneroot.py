"""One-root collectives in steady state (paper 003; docs/algorithms.md "One-root collectives").

References: paper 003 §3.1 (Figure 1 platform: best tree 2/3, best DAG 4/5, optimum 1;
Figure 2's period-2 schedule), brute force over all spanning arborescences, an independent
dense SSB LP (003 §5.2, one flow per destination, written here separately), min over v of
networkx max-flows (Edmonds' branching theorem), and a dense multicommodity scatter LP.
"""

from fractions import Fraction
from itertools import product

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linprog

from topofinder.errors import TopofinderError
from topofinder.model.oneroot_schedule import PeriodicSchedule, ScheduleError, replay
from topofinder.scoring.oneroot.periodic import periodic_schedule
from topofinder.scoring.oneroot.platform import from_topology, make_platform
from topofinder.scoring.oneroot.steady import throughput
from topofinder.scoring.oneroot.structures import best_dag, weighted_trees
from topofinder.scoring.oneroot.tree_heuristic import best_tree, tree_throughput
from topofinder.families.build import load_topology

# 003 Figure 1: P_s = 0, P_1..P_4 = 1..4; c = 1 except c_{1,3} = c_{2,4} = 1/2 (capacity 2),
# as the text of §3.1 gives them (P_1 needs 1.5 time units to serve P_2 and P_3).
FIG1 = [(0, 1, 1), (0, 2, 1), (1, 2, 1), (2, 1, 1), (1, 3, 2), (2, 4, 2)]


def fig1(port_model="one", bandwidth=None):
    s, d, c = zip(*FIG1)
    return make_platform(5, s, d, c, 0, port_model, bandwidth, "Figure 1")


def brute_best_tree(pl):
    """Max TP(T) over every spanning arborescence (one parent link per non-root node)."""
    into = [[e for e in range(pl.m) if pl.dst[e] == v] for v in range(pl.n)]
    best = Fraction(0)
    others = [v for v in range(pl.n) if v != pl.root]
    for choice in product(*(into[v] for v in others)):
        parent = [-1] * pl.n
        for v, e in zip(others, choice):
            parent[v] = e
        ok = True
        for v in others:                       # every node must reach the root
            seen, x = set(), v
            while x != pl.root and x not in seen:
                seen.add(x)
                x = int(pl.src[parent[x]])
            ok &= x == pl.root
        if ok:
            best = max(best, tree_throughput(pl, parent))
    return best


def _commodity_flows(pl):
    """Variables [x_i,e for destination i, link e] + [n_e] + [TP]; rows: x_i is a flow of
    value TP from the root to destination i."""
    dests = [v for v in range(pl.n) if v != pl.root]
    m, k = pl.m, len(dests)
    nv = k * m + m + 1
    a_eq, b_eq = [], []
    for i, t in enumerate(dests):
        for v in range(pl.n):
            row = np.zeros(nv)
            row[i * m + np.flatnonzero(pl.dst == v)] += 1
            row[i * m + np.flatnonzero(pl.src == v)] -= 1
            row[-1] = -1 if v == t else (1 if v == pl.root else 0)
            a_eq.append(row)
            b_eq.append(0)
    return m, k, nv, a_eq, b_eq


def _max_tp(nv, a_ub, b_ub, a_eq, b_eq):
    c = np.zeros(nv)
    c[-1] = -1
    res = linprog(c, A_ub=np.array(a_ub), b_ub=b_ub, A_eq=np.array(a_eq), b_eq=b_eq,
                  bounds=(0, None), method="highs")
    return -res.fun


def dense_ssb(pl):
    """003 §5.2 SSB as max TP: a flow x_i of value TP to every destination i, n_e ≥ x_i,e,
    port rows on n. Variables [x_i,e for i, e] + [n_e] + [TP]."""
    m, k, nv, a_eq, b_eq = _commodity_flows(pl)
    a_ub, b_ub = [], []
    for i in range(k):
        for e in range(m):
            row = np.zeros(nv)
            row[i * m + e], row[k * m + e] = 1, -1
            a_ub.append(row)
            b_ub.append(0)
    _port_rows_dense(pl, nv, k * m, a_ub, b_ub)
    return _max_tp(nv, a_ub, b_ub, a_eq, b_eq)


def _port_rows_dense(pl, nv, off, a_ub, b_ub):
    coef = (1 / pl.cap) if pl.port_model == "one" else np.ones(pl.m)
    if pl.port_model != "multi":
        for ends in (pl.src, pl.dst):
            for v in range(pl.n):
                row = np.zeros(nv)
                row[off + np.flatnonzero(ends == v)] = coef[ends == v]
                a_ub.append(row)
                b_ub.append(1 if pl.port_model == "one" else float(pl.bandwidth))
    if pl.port_model != "one":
        for e in range(pl.m):
            row = np.zeros(nv)
            row[off + e] = 1
            a_ub.append(row)
            b_ub.append(float(pl.cap[e]))


def dense_scatter(pl):
    """Scatter as a true multicommodity LP: one commodity per destination, each of value TP,
    link rates n_e = Σ_i x_i,e under the port rows."""
    m, k, nv, a_eq, b_eq = _commodity_flows(pl)
    a_ub, b_ub = [], []
    for e in range(m):
        row = np.zeros(nv)
        row[[i * m + e for i in range(k)]] = 1
        row[k * m + e] = -1
        a_eq.append(row)
        b_eq.append(0)
    _port_rows_dense(pl, nv, k * m, a_ub, b_ub)
    return _max_tp(nv, a_ub, b_ub, a_eq, b_eq)


def random_platform(seed, port_model="one", bandwidth=None):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 8))
    arcs = {}
    for v in range(1, n):                       # a random arborescence keeps all reachable
        arcs[(int(rng.integers(0, v)), v)] = int(rng.integers(1, 5))
    for _ in range(int(rng.integers(n, 3 * n))):
        u, w = (int(x) for x in rng.integers(0, n, 2))
        if u != w:
            arcs[(u, w)] = int(rng.integers(1, 5))
    (s, d), c = zip(*arcs), list(arcs.values())
    return make_platform(n, s, d, c, 0, port_model, bandwidth, f"random {seed}")


# ---- paper 003 §3.1 ------------------------------------------------------------------------
def test_figure1_tree_dag_optimum():
    pl = fig1()
    tree, parent = best_tree(pl)
    assert tree == brute_best_tree(pl) == Fraction(2, 3)
    dag, order, exhaustive = best_dag(pl, parent)
    assert exhaustive and dag == Fraction(4, 5)
    opt = throughput(pl)
    # 003 §3.1: "the source cannot send more than one message at each time-unit"
    assert opt.value == 1 and opt.certificate["kind"] == "port-row"
    assert opt.certificate["node"] == 0 and opt.certificate["row"] == "send"


def test_figure2_schedule_replays():
    """003 Figure 2: period 2, one message per time unit. Its per-period sends: P_s→P_1,
    P_s→P_2, P_1→P_2, P_2→P_1 one message each, P_1→P_3 and P_2→P_4 two each (c = 1/2);
    odd messages go P_s→P_1→P_2, even ones P_s→P_2→P_1. The slots are the one-port matchings
    {P_s→P_1, P_1→P_2, P_2→P_4} and {P_s→P_2, P_2→P_1, P_1→P_3}."""
    doc = {"format": "topofinder-oneroot-schedule", "n": 5, "root": 0, "port_model": "one",
           "period": "2", "links": [list(a) for a in FIG1],
           "trees": [{"weight": 1, "parent": [-1, 0, 1, 1, 2]},
                     {"weight": 1, "parent": [-1, 2, 0, 1, 2]}],
           "slots": [{"duration": "1", "sends": [[0, 1, 0, 0, 1, 0], [1, 2, 0, 0, 1, 1],
                                                 [2, 4, 0, 0, 1, 2], [2, 4, 1, 0, 1, 1]]},
                     {"duration": "1", "sends": [[0, 2, 1, 0, 1, 0], [2, 1, 1, 0, 1, 1],
                                                 [1, 3, 0, 0, 1, 1], [1, 3, 1, 0, 1, 2]]}]}
    s = PeriodicSchedule.from_dict(doc)
    assert s.throughput == 1
    rep = replay(s, 100)
    assert rep.throughput == 1 and rep.completion <= 100 + 2 * 3
    bad = dict(doc, slots=[doc["slots"][0] | {"sends": doc["slots"][0]["sends"]
                                              + [[2, 1, 1, 0, 1, 1]]}, doc["slots"][1]])
    with pytest.raises(ScheduleError, match="one-port|exactly once"):
        replay(PeriodicSchedule.from_dict(bad))


def test_replay_rejects_forwarding_before_receiving():
    pl = fig1()
    opt = throughput(pl)
    s = periodic_schedule(pl, weighted_trees(pl, opt.rates, opt.value))
    doc = s.to_dict()
    for slot in doc["slots"]:
        for row in slot["sends"]:
            if row[0] != 0:
                row[5] = 0                    # forward the batch the root is sending now
    with pytest.raises(ScheduleError, match="before holding"):
        replay(PeriodicSchedule.from_dict(doc), 10)


@pytest.mark.parametrize("port_model,bandwidth,tp", [("one", None, 1), ("multi", None, 2),
                                                      ("node", 1, Fraction(3, 4))])
def test_figure1_schedule_is_asymptotically_optimal(port_model, bandwidth, tp):
    pl = fig1(port_model, bandwidth)
    opt = throughput(pl)
    assert opt.value == tp
    s = periodic_schedule(pl, weighted_trees(pl, opt.rates, opt.value))
    ratios = [replay(s, k).completion * tp / k for k in (10, 100, 1000)]
    assert s.throughput == tp and ratios[0] > ratios[1] > ratios[2] >= 1
    assert ratios[2] < Fraction(101, 100)


# ---- second methods ------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(20))
def test_one_port_equals_dense_lp(seed):
    pl = random_platform(seed)
    opt = throughput(pl)
    assert float(opt.value) == pytest.approx(dense_ssb(pl), rel=1e-7)
    tree, _ = best_tree(pl)
    assert tree <= opt.value
    if pl.n <= 6:
        assert brute_best_tree(pl) >= tree
    s = periodic_schedule(pl, weighted_trees(pl, opt.rates, opt.value))
    assert replay(s, 50).throughput == opt.value


@pytest.mark.parametrize("seed", range(6))
def test_node_bandwidth_equals_dense_lp(seed):
    pl = random_platform(100 + seed, "node", Fraction(5, 2))
    opt = throughput(pl)
    assert float(opt.value) == pytest.approx(dense_ssb(pl), rel=1e-7)
    s = periodic_schedule(pl, weighted_trees(pl, opt.rates, opt.value))
    assert replay(s, 20).throughput == opt.value


@pytest.mark.parametrize("seed", range(20))
def test_multi_port_equals_min_maxflow(seed):
    pl = random_platform(200 + seed, "multi")
    g = nx.DiGraph()
    for u, w, c in zip(pl.src, pl.dst, pl.cap):
        g.add_edge(int(u), int(w), capacity=int(c))
    ref = min(nx.maximum_flow_value(g, 0, v) for v in range(1, pl.n))
    opt = throughput(pl)
    assert opt.value == ref
    side = np.zeros(pl.n, bool)
    side[opt.certificate["source_side"]] = True
    assert int(pl.cap[side[pl.src] & ~side[pl.dst]].sum()) == ref and side[0]


@pytest.mark.parametrize("seed,port_model", [(s, pm) for s in range(5)
                                             for pm in ("one", "multi")])
def test_scatter_equals_multicommodity_lp(seed, port_model):
    pl = random_platform(300 + seed, port_model)
    assert float(throughput(pl, "scatter").value) == pytest.approx(dense_scatter(pl), rel=1e-7)


def test_reduce_and_gather_are_the_reversed_problems():
    topo = load_topology("C(7,{1,3})")
    pl = from_topology(topo, 2, "one")
    rev = from_topology(topo.transpose(), 2, "one")
    assert throughput(pl, "reduce").value == throughput(rev, "broadcast").value
    assert throughput(pl, "gather").value == throughput(rev, "scatter").value


def test_kautz_one_port_certified_by_a_port_row():
    pl = from_topology(load_topology("Pi(3,24)"), 0, "one")
    opt = throughput(pl)
    assert opt.value == 1 and opt.certificate["kind"] == "port-row"
    assert float(opt.value) == pytest.approx(dense_ssb(pl), rel=1e-7)


# ---- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,message", [
    ({"root": 9}, "root 9 out of range"),
    ({"cap": [1, 0, 1, 1, 1, 1]}, "capacities must be positive integers"),
    ({"port_model": "two"}, "port model 'two' unknown"),
    ({"port_model": "node"}, "needs --node-bandwidth"),
])
def test_bad_input_one_line(kwargs, message):
    s, d, c = zip(*FIG1)
    args = {"root": 0, "cap": c, "port_model": "one"} | kwargs
    with pytest.raises(TopofinderError, match=message) as err:
        make_platform(5, s, d, args["cap"], args["root"], args["port_model"])
    assert "\n" not in str(err.value)


def test_unreachable_destination():
    with pytest.raises(TopofinderError, match="cannot be reached from root 0"):
        make_platform(3, [0, 2], [1, 1], [1, 1], 0)
    with pytest.raises(TopofinderError, match="reach the root"):
        throughput(fig1(), "reduce")


# ---- command line ----------------------------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (["C(8,{1,3})", "--root", "8"], "root 8 out of range"),
    (["C(8,{1,3})", "--port-model", "node"], "needs --node-bandwidth"),
    (["C(8,{1,3})", "--port-model", "node", "--node-bandwidth", "0"], "must be positive"),
    (["UNREACH", "--directed", "--root", "1"], "cannot be reached from root 1"),
    (["ZERO"], "capacity must be an integer"),
])
def test_cli_bad_input_one_line(tmp_path, capsys, args, message):
    from topofinder.cli.main import main

    (tmp_path / "u.txt").write_text("0 1 1\n1 2 1\n")
    (tmp_path / "z.txt").write_text("0 1 0\n1 2 1\n2 0 1\n")
    files = {"UNREACH": str(tmp_path / "u.txt"), "ZERO": str(tmp_path / "z.txt")}
    args = [files.get(a, a) for a in args]
    assert main(["score", *args, "--collective", "broadcast"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_cli_score_and_schedule(tmp_path, capsys):
    from topofinder.cli.main import main
    import json

    out = tmp_path / "bcast.json"
    assert main(["score", "C(8,{1,3})", "--collective", "broadcast", "--port-model", "multi",
                 "--schedule", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["TP_exact"] == "4/1" and doc["certificate"]["cut_capacity"] == 4
    sched = PeriodicSchedule.from_dict(json.loads(out.read_text()))
    assert replay(sched, 40).throughput == 4


# ---- execution plan (the MPI executor's own packing code, all ranks in one process) ----------
@pytest.mark.parametrize("collective,port_model,root", [("broadcast", "one", 0),
                                                        ("broadcast", "multi", 5),
                                                        ("reduce", "one", 3)])
def test_periodic_schedule_executes(collective, port_model, root):
    from topofinder.execute.plan import oneroot_program, simulate
    from topofinder.scoring.oneroot.summary import oneroot_schedule

    topo = load_topology("Torus(3,3)")
    doc = oneroot_schedule(topo, collective, root, port_model).to_dict()
    prog = oneroot_program(doc, batches=4)
    e, rng = 3, np.random.default_rng(1)
    count = prog.pieces * e
    data = [rng.integers(-50, 50, count).astype(np.float64) for _ in range(topo.n)]
    if collective == "broadcast":
        want = data[root].copy()
        for r in range(topo.n):
            if r != root:
                data[r][:] = np.nan
        simulate(prog, data, e)
        assert all(np.array_equal(d, want) for d in data)
    else:
        want = np.sum(data, axis=0)
        simulate(prog, data, e)
        assert np.array_equal(data[root], want)


@pytest.mark.parametrize("seed", range(8))
def test_cut_generation_equals_flow_form(seed):
    """Cut generation (every size) against 003's SSB flow form on small platforms."""
    import topofinder.scoring.oneroot.steady as steady

    pl = random_platform(seed, "one" if seed % 2 else "node", None if seed % 2 else 2)
    flow = steady.flow_broadcast(pl)
    cut = steady.lp_broadcast(pl)
    assert cut.value == flow.value
    assert float(cut.value) == pytest.approx(dense_ssb(pl), rel=1e-7)
