"""Baselines (ShiftedRing, double binary tree, closest torus; paper 001 §8.2, Table 4) scored
against theory, and the MoE workload file and iteration split (paper 001 App. A.4)."""

import json
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from topofinder.cli.main import main
from topofinder.errors import TopofinderError
from topofinder.compute.parallel import begin
from topofinder.export.plot import plot_frontier
from topofinder.families.shifted_ring_dbt import binary_tree_parents, double_tree_parents, ring_shifts
from topofinder.families.build import parse
from topofinder.finder.baseline_scores import baseline_specs, closest_torus, score_baseline
from topofinder.model.schedule import validate
from topofinder.scoring.alltoall.concurrent_flow import alltoall_summary
from topofinder.scoring.allgather.ring_and_two_tree import (
    double_tree_cut_bound, ring_allgather, tree_distances, two_tree_allgather,
)
from topofinder.workload.cost import Workload
from topofinder.workload.moe import load_moe, unoverlapped_allreduce
from topofinder.workload.rank import search

SCHEMA = Path(__file__).resolve().parents[1] / "topofinder" / "schemas" / "search.schema.json"


# ---- families ---------------------------------------------------------------------------
def test_shifted_ring_shifts_degree_and_diameter():
    assert ring_shifts(4, 1024) == (1, 3)          # C(1024,{1,3}): Table 4's 10738 us
    assert ring_shifts(4, 12) == (1, 5)            # 2, 3, 4 share a factor with 12
    g = parse("ShiftedRing(4,12)")
    assert g.is_regular and g.degree == 4 and g.bidirectional
    # C(12,{1,5}) by hand: offsets 1..6 need 1, 2, 3, 2, 1, 2 hops (3 = 1+1+1 = 5+5+5)
    assert g.diameter == 3
    assert parse("ShiftedRing(4,12)").same_arcs(parse("C(12,{1,5})"))
    with pytest.raises(TopofinderError):
        parse("ShiftedRing(3,12)")
    with pytest.raises(TopofinderError):
        parse("ShiftedRing(6,6)")                  # only shift 1 is coprime below 3


def test_nccl_double_binary_tree_by_hand():
    # ncclGetBtree for 8 ranks: 0-4, 4-2, 4-6, 2-1, 2-3, 6-5, 6-7
    assert binary_tree_parents(8).tolist() == [-1, 2, 4, 2, 0, 6, 4, 6]
    p0, p1 = double_tree_parents(8)
    assert p1.tolist() == [1, 3, 1, 7, 5, 3, 5, -1]     # the mirror r -> 7 - r, root 7
    g = parse("DBT(8)")
    cap = g.link_matrix.toarray()
    assert cap[1, 2] == 2 and cap[5, 6] == 2           # edges of both trees: 2-fold links
    assert g.out_degrees.tolist() == [2, 4, 4, 4, 4, 4, 4, 2]
    for m in (8, 13, 64, 100):
        t = parse(f"DBT({m})")
        assert t.degree == 4 and t.bidirectional and t.strongly_connected
        inner = [set(np.unique(p[p >= 0]).tolist()) for p in double_tree_parents(m)]
        assert len(inner[0] & inner[1]) <= 1           # inner in one tree, leaf in the other


# ---- schedules against theory -------------------------------------------------------------
def test_ring_schedule_is_linear_latency_and_bw_optimal():
    for d, m in ((4, 12), (2, 7), (6, 16)):
        s = ring_allgather(d, m)
        validate(s)
        assert s.num_steps == m - 1 and s.tau == Fraction(m - 1, m)


def _tree_flood(m):
    """Independent count: half j of v's shard crosses tree arc (u, w) at step dist_j(v, w)."""
    load = defaultdict(int)
    for j, parent in enumerate(double_tree_parents(m)):
        adj = defaultdict(list)
        for c in range(m):
            if parent[c] >= 0:
                adj[c].append(parent[c])
                adj[parent[c]].append(c)
        for v in range(m):
            seen, frontier, t = {v}, [v], 0
            while frontier:
                t += 1
                nxt = []
                for u in frontier:
                    for w in adj[u]:
                        if w not in seen:
                            seen.add(w)
                            nxt.append(w)
                            load[(t, u, w)] += 1
                frontier = nxt
    g = parse(f"DBT({m})")
    cap = g.link_matrix.toarray()
    steps = max(t for t, _, _ in load)
    peak = [max(Fraction(c, int(cap[u, w])) for (tt, u, w), c in load.items() if tt == t)
            for t in range(1, steps + 1)]
    return steps, sum(peak) * Fraction(4, 2 * m)


@pytest.mark.parametrize("m", [8, 13, 32])
def test_two_tree_schedule_matches_an_independent_count(m):
    s = two_tree_allgather(m)
    validate(s)
    assert (s.num_steps, s.tau) == _tree_flood(m)


@pytest.mark.parametrize("m", [2, 5, 13, 64])
def test_two_tree_rows_are_the_tree_floods(m):
    """Its rows, as a set and in step order, are those of a BFS from every source on each
    tree: tree j's arc x → y carries v's half at step dist_j(v, y) when x is y's BFS parent."""
    import networkx as nx
    from topofinder.families.shifted_ring_dbt import double_tree_parents

    want = set()
    for j, parent in enumerate(double_tree_parents(m)):
        g = nx.Graph((int(c), int(parent[c])) for c in np.flatnonzero(parent >= 0))
        for v in range(m):
            for x, y in nx.bfs_edges(g, v):
                want.add((nx.shortest_path_length(g, v, y), v, j, j + 1, x, y))
    s = two_tree_allgather(m)
    assert set(map(tuple, s.sends.tolist())) == want and len(s.sends) == len(want)
    assert np.all(np.diff(s.sends[:, 0]) >= 0)


@pytest.mark.parametrize("m", [2, 3, 8, 13, 64, 100])
def test_tree_cut_bound_by_masks(m):
    """double_tree_cut_bound (subtree sums) against each tree-edge cut counted arc by arc."""
    import networkx as nx
    from topofinder.families.shifted_ring_dbt import double_binary_tree, double_tree_parents

    topo = double_binary_tree(m)
    src, dst, cap = topo.src.tolist(), topo.dst.tolist(), topo.arc_capacity.tolist()
    want = None
    for parent in double_tree_parents(m):
        g = nx.DiGraph((int(parent[c]), int(c)) for c in np.flatnonzero(parent >= 0))
        for a in np.flatnonzero(parent >= 0).tolist():
            side = nx.descendants(g, a) | {a}
            out = sum(c for u, w, c in zip(src, dst, cap) if u in side and w not in side)
            back = sum(c for u, w, c in zip(src, dst, cap) if w in side and u not in side)
            bound = Fraction(min(out, back), len(side) * (m - len(side)))
            want = bound if want is None else min(want, bound)
    assert double_tree_cut_bound(m) == want


def test_two_tree_schedule_by_hand_at_8():
    s = two_tree_allgather(8)
    # tree 0's diameter: 1-2-4-6-5 (4 hops); step-1 load: every arc 1 half per tree
    assert s.num_steps == 4 and s.step_loads[0] == 1
    assert s.tau == Fraction(9, 4)


def test_alltoall_of_baselines_against_cut_bounds():
    # ShiftedRing(4,64) = C(64,{1,3}): halves cut by 2 + 2·3 arcs each way: f <= 8/32² and
    # the LP reaches it (Table 4's 32/N² at N = 1024); the double tree: 16/N²; the 8×8 torus
    # (edge-transitive): hop-count bound 4N / (N · k³/2) = 1/64
    for expr, f in (("ShiftedRing(4,64)", 32 / 64 ** 2), ("DBT(64)", 16 / 64 ** 2),
                    ("Torus(8,8)", 1 / 64)):
        a = alltoall_summary(parse(expr), mode="exact")
        assert a["alltoall_f"] == pytest.approx(f, rel=1e-6), expr


# ---- baseline specs -------------------------------------------------------------------------
def test_closest_torus_and_specs():
    assert closest_torus(1024, 2) == (32, 32)
    assert closest_torus(1000, 2) == (25, 40)
    assert closest_torus(97, 2) is None
    assert closest_torus(64, 3) == (4, 4, 4)
    names = {s.name: s for s in baseline_specs(1024, 4)}
    assert names["Torus2D"].expr == "Torus(32,32)" and names["DBT"].expr == "DBT(1024)"
    assert names["ShiftedRing"].expr == "ShiftedRing(4,1024)"
    odd = baseline_specs(97, 3)
    assert all(s.expr is None and s.note.startswith("skipped") for s in odd)
    prime = {s.name: s for s in baseline_specs(97, 4)}
    assert prime["Torus2D"].expr is None and prime["DBT"].expr == "DBT(97)"


def test_score_baseline_uses_its_own_schedule():
    v = score_baseline("ShiftedRing(4,16)", "ring", False)
    assert (v["T_L"], v["tau"], v["allreduce_T_L"], v["allreduce_tau"]) == (15, "15/16", 30,
                                                                             "15/8")
    assert v["bfb_T_L"] == parse("ShiftedRing(4,16)").diameter
    t = score_baseline("Torus(4,4)", "bfb", True)
    assert (t["T_L"], t["tau"]) == (4, "15/16")         # BFB on a torus: diameter, BW-optimal


# ---- MoE workload -----------------------------------------------------------------------
MOE = """
[compute]
forward = "10ms"
backward = "20ms"
[allreduce]
buckets = ["25MB", "25MB"]
[alltoall]
size = "4MB"
count = 8
"""


def test_unoverlapped_allreduce_by_hand():
    # buckets ready at 10 and 20 ms, 12 ms each: 10-22, 22-34 → 14 ms after backward ends
    assert unoverlapped_allreduce([1, 1], [0.012, 0.012], 0.020, True) == pytest.approx(0.014)
    # short buckets hide entirely except the last one's 3 ms
    assert unoverlapped_allreduce([3, 1], [0.003, 0.003], 0.020, True) == pytest.approx(0.003)
    assert unoverlapped_allreduce([3, 1], [0.003, 0.004], 0.020, False) == pytest.approx(0.007)


def test_iteration_split_by_hand(tmp_path):
    f = tmp_path / "moe.toml"
    f.write_text(MOE)
    moe = load_moe(f)
    split = moe.iteration(lambda m: 0.012, lambda m: 0.001)
    assert split["compute_s"] == pytest.approx(0.030)
    assert split["allreduce_unoverlapped_s"] == pytest.approx(0.014)
    assert split["alltoall_s"] == pytest.approx(0.008)
    assert split["iteration_s"] == pytest.approx(0.052)


@pytest.mark.parametrize("text,word", [
    ("[compute\nforward = 1", "not valid TOML"),
    (MOE.replace("count = 8", "count = -1"), "count"),
    (MOE.replace('size = "4MB"', 'size = "4 parsecs"'), "[alltoall] size"),
    (MOE + "\n[gpu]\nx = 1\n", "unknown section"),
    (MOE.replace("[alltoall]", "[alltoall]\nvolume = 3"), "unknown key"),
    (MOE.replace('buckets = ["25MB", "25MB"]', "buckets = []"), "buckets"),
])
def test_bad_workload_files_are_one_line_exit_2(tmp_path, capsys, text, word):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    code = main(["search", "--n", "16", "--d", "4", "--workload", str(f), "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and word in err


def test_search_document_with_moe_and_baselines_validates(tmp_path):
    f = tmp_path / "moe.toml"
    f.write_text(MOE)
    moe = load_moe(f)
    doc = search(16, 4, Workload(), jobs=1, use_cache=False, baselines=True, moe=moe).to_dict()
    jsonschema.validate(json.loads(json.dumps(doc)), json.loads(SCHEMA.read_text()))
    best = doc["frontier"][doc["recommended"]]
    assert best["objective_s"] == best["iteration"]["iteration_s"]
    assert min(p["iteration"]["iteration_s"] for p in doc["frontier"]) == best["objective_s"]
    names = [b["name"] for b in doc["baselines"]]
    assert names == ["ShiftedRing", "DBT", "Torus2D"]
    ring = doc["baselines"][0]
    assert ring["speedup"]["allreduce"] == pytest.approx(ring["allreduce_time_s"]
                                                         / best["allreduce_time_s"])
    assert ring["speedup"]["objective"] == pytest.approx(ring["iteration"]["iteration_s"]
                                                         / best["iteration"]["iteration_s"])


def test_search_cli_prints_speedups_and_can_skip_them(capsys):
    assert main(["search", "--n", "16", "--d", "4", "--no-cache", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "speedup allreduce" in out and "ShiftedRing(4,16)" in out and "DBT(16)" in out
    assert main(["search", "--n", "16", "--d", "4", "--no-cache", "--jobs", "1",
                 "--no-baselines"]) == 0
    assert "speedup" not in capsys.readouterr().out


def test_plot_draws_the_baselines_panel(tmp_path):

    doc = search(16, 4, Workload(), jobs=1, use_cache=False, baselines=True).to_dict()
    out = tmp_path / "f.svg"
    plot_frontier(doc, str(out))
    text = out.read_text()
    assert "ShiftedRing(4,16)" in text and "DBT(16)" in text and "against the baselines" in text


def test_double_tree_cut_bound_is_certified_and_tight():
    # at 64 the exact LP gives 16/64² (test above); the best tree cut S = 31 | 33 nodes with
    # 4 arcs each way gives 4/1023 ≥ it; at 8: |S| = 3 (2-1, 2-3 below 4), 4 arcs: 4/15
    assert double_tree_cut_bound(64) == Fraction(4, 31 * 33)
    assert double_tree_cut_bound(8) == Fraction(4, 15)
    for m in (13, 32):
        f = alltoall_summary(parse(f"DBT({m})"), mode="exact")["alltoall_f"]
        assert f <= float(double_tree_cut_bound(m)) * (1 + 1e-9)
    v = score_baseline("DBT(32)", "double-binary-tree", True)
    assert v["alltoall_f"] <= v["alltoall_f_upper"] <= float(double_tree_cut_bound(32))


def test_baselines_repeat_from_the_cache_without_a_worker_pool(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    told = []
    first = search(16, 4, Workload(), jobs=2, baselines=True,
                   baseline_progress=lambda done, count, exprs: told.append((done, count)))
    assert told[0] == (0, 3) and sorted(told[1:]) == [(1, 3), (2, 3), (3, 3)]

    def no_pool(fn, items, **kwargs):
        assert not items, "a warm search scored a baseline again"
        return begin(fn, items, **kwargs)

    monkeypatch.setattr("topofinder.workload.baseline_speedups.begin", no_pool)
    told.clear()
    again = search(16, 4, Workload(), jobs=2, baselines=True,
                   baseline_progress=lambda done, count, exprs: told.append((done, count)))
    assert told == [] and again.baselines == first.baselines


def test_tree_distances_equal_breadth_first_search():
    """tree_distances (preorder rows) against scipy's all-sources BFS on both DBT trees for
    m = 2..40 and 1024, and on random trees with a random root."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import shortest_path

    def bfs(parent):
        m = parent.size
        child = np.flatnonzero(parent >= 0)
        a = sp.coo_matrix((np.ones(child.size), (child, parent[child])), shape=(m, m))
        return shortest_path(a.tocsr(), directed=False, unweighted=True).astype(np.int64)

    rng = np.random.default_rng(1)
    for m in [*range(2, 41), 1024]:
        for parent in double_tree_parents(m):
            assert np.array_equal(tree_distances(parent), bfs(parent)), m
        perm = rng.permutation(m)
        parent = np.full(m, -1)
        for i in range(1, m):
            parent[perm[i]] = perm[rng.integers(0, i)]
        assert np.array_equal(tree_distances(parent), bfs(parent)), m
