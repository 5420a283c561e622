"""Patch-panel plans: port discipline, arcs, panels, diffs (DESIGN §10)."""

from collections import Counter

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.model.operations import bidirectional, degree_expansion, line_graph
from topofinder.cabling.patch_panel import (
    DUPLEX, HEADER, LOOPBACK, SIMPLEX, diff_plans, parse_plan, plan_patch_panel, read_plan,
)
from topofinder.families import (
    bi_ring, circulant, complete, complete_bipartite, de_bruijn, generalized_kautz, hypercube,
    torus, uni_ring,
)
from topofinder.model.topology import Topology

TOPOLOGIES = {
    "C(16,{3,4})": lambda: circulant(16, [3, 4]),
    "K(5)": lambda: complete(5),                       # class 2: needs crossed cables
    "K(4)": lambda: complete(4),                       # odd degree
    "Hypercube(3)": lambda: hypercube(3),              # bipartite, odd degree
    "Torus(3,5)": lambda: torus(3, 5),                 # odd N: no 1-factorisation
    "Pi(4,30)": lambda: generalized_kautz(4, 30),      # self-loops
    "BiRing(4,5)": lambda: bi_ring(4, 5),              # duplex multi-arcs
    "UniRing(2,5)": lambda: uni_ring(2, 5),            # simplex multi-arcs
    "DBJ(2,4)": lambda: de_bruijn(2, 4),               # self-loops, 2-cycles
    "Bi(DBJ(2,3))": lambda: bidirectional(de_bruijn(2, 3)),   # duplex with loops
    "K(3,3)": lambda: complete_bipartite(3),
    "K(3)*2": lambda: degree_expansion(complete(3), 2),
    "L(C(8,{1,2}))": lambda: line_graph(circulant(8, [1, 2])),
}


def _ends_ok(plan, d):
    """Every node uses exactly its d ports 0..d−1, each at most one fibre each way."""
    tx, rx = plan.port_usage()
    for ends in (tx, rx):
        assert len({tuple(e) for e in ends.tolist()}) == len(ends)      # ≤ 1 fibre per end
        assert ends[:, 1].min() >= 0 and ends[:, 1].max() < d
        per_node = np.bincount(ends[:, 0], minlength=plan.n)
        assert np.all(per_node == d)


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("cabling", ["auto", "simplex"])
def test_plan_ports_and_arcs(name, cabling):
    g = TOPOLOGIES[name]()
    assert g.is_regular
    plan = plan_patch_panel(g, cabling=cabling)
    _ends_ok(plan, g.degree)
    assert plan.to_topology().same_arcs(Topology(g.n, g.src, g.dst))
    back = parse_plan(plan.to_csv(), g.n)
    assert np.array_equal(back.rows, plan.rows) and np.array_equal(back.kinds, plan.kinds)
    duplex = cabling == "auto" and g.bidirectional
    assert set(plan.kinds.tolist()) <= ({DUPLEX, LOOPBACK} if duplex else {SIMPLEX, LOOPBACK})
    loops = plan.kinds == LOOPBACK
    assert np.count_nonzero(loops) == g.self_loops
    assert np.all(plan.rows[loops, 2] == plan.rows[loops, 4])
    assert np.all(plan.rows[loops, 3] == plan.rows[loops, 5])


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_simplex_ports_are_permutations(name):
    """König: port p of u transmits to port p of σ_p(u), σ_p a permutation of the nodes."""
    g = TOPOLOGIES[name]()
    plan = plan_patch_panel(g, cabling="simplex")
    r = plan.rows
    assert np.all(r[:, 3] == r[:, 5])
    for p in range(g.degree):
        sel = r[:, 3] == p
        assert sorted(r[sel, 2].tolist()) == list(range(g.n))
        assert sorted(r[sel, 4].tolist()) == list(range(g.n))


@pytest.mark.parametrize("make", [lambda: hypercube(4), lambda: complete_bipartite(4),
                                  lambda: torus(4, 6), lambda: circulant(12, [1, 3])])
def test_bipartite_duplex_plan_uses_one_port_number_per_cable(make):
    """A regular bipartite multigraph has a 1-factorisation (König): no crossed cable."""
    g = make()
    plan = plan_patch_panel(g)
    assert np.all(plan.kinds == DUPLEX) and plan.crossed == 0


@pytest.mark.parametrize("make", [lambda: complete(5), lambda: torus(3, 5),
                                  lambda: circulant(9, [1, 2])])
def test_odd_order_forces_crossed_cables(make):
    """N odd: a same-port class is a matching of ≤ (N−1)/2 cables, so at least
    E − d·(N−1)/2 cables must end on different port numbers."""
    g = make()
    plan = plan_patch_panel(g)
    cables = g.num_arcs // 2
    assert plan.crossed >= cables - g.degree * ((g.n - 1) // 2) > 0
    same = plan.rows[plan.rows[:, 3] == plan.rows[:, 5]]
    for p in range(g.degree):             # each same-port class really is a matching
        nodes = same[same[:, 3] == p][:, [2, 4]].reshape(-1)
        assert len(set(nodes.tolist())) == nodes.size


def test_duplex_needs_bidirectional():
    with pytest.raises(TopofinderError, match="not bidirectional"):
        plan_patch_panel(de_bruijn(2, 3), cabling="duplex")


def test_irregular_topology_uses_its_own_degrees():
    g = Topology(4, [0, 0, 0, 1, 2, 3, 3], [1, 2, 3, 0, 0, 0, 3])
    plan = plan_patch_panel(g)
    tx, rx = plan.port_usage()
    assert Counter(tx[:, 0].tolist()) == Counter(g.src.tolist())
    assert Counter(rx[:, 0].tolist()) == Counter(g.dst.tolist())
    assert len({tuple(e) for e in tx.tolist()}) == len(tx)
    assert plan.to_topology().same_arcs(g)


def test_panels_split_and_positions(tmp_path):
    g = circulant(16, [3, 4])                  # 32 duplex cables
    plan = plan_patch_panel(g, panel_size=10)   # 5 connections per panel
    assert plan.num_panels == -(-32 // 5)
    pos = plan.rows[:, :2]
    assert len({tuple(p) for p in pos.tolist()}) == 32
    assert pos[:, 1].max() <= 8 and np.all(pos[:, 1] % 2 == 0)
    assert np.bincount(pos[:, 0]).max() == 5
    path = tmp_path / "plan.csv"
    plan.write_csv(path)
    assert path.read_text().splitlines()[0] == ",".join(HEADER)
    assert read_plan(path).to_topology().same_arcs(g)
    with pytest.raises(TopofinderError, match="even"):
        plan_patch_panel(g, panel_size=7)


@pytest.mark.parametrize("text, what", [
    ("a,b\n", "header"),
    (",".join(HEADER) + "\n0,0,1,0,2\n", "fields"),
    (",".join(HEADER) + "\n0,0,1,0,2,0,triplex\n", "kind"),
    (",".join(HEADER) + "\n0,0,x,0,2,0,simplex\n", "integers"),
])
def test_bad_plan_files(text, what):
    with pytest.raises(TopofinderError, match=what):
        parse_plan(text)


def test_diff_of_identical_plan_is_empty():
    g = line_graph(circulant(16, [3, 4]), 2)
    d = diff_plans(plan_patch_panel(g), g)
    assert d.moves == 0 and d.new.num_rows == d.old.num_rows


def _moved_arcs(old_topo, new_topo, phys):
    """Arcs of the new topology (in old names) missing from the old plan: an independent count
    of the simplex fibres that must be laid."""
    old = Counter(zip(old_topo.src.tolist(), old_topo.dst.tolist()))
    new = Counter(zip(phys[new_topo.src].tolist(), phys[new_topo.dst].tolist()))
    return sum((new - old).values())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_diff_after_rewiring_moves_only_changed_fibres(seed):
    g = line_graph(circulant(10, [1, 3]))          # unidirectional, simplex
    rng = np.random.default_rng(seed)
    dst = g.dst.copy()
    i, j = rng.choice(g.num_arcs, 2, replace=False)
    dst[[i, j]] = dst[[j, i]]                        # swap two heads: in/out degrees kept
    h = Topology(g.n, g.src, dst)
    old = plan_patch_panel(g)
    d = diff_plans(old, h)
    assert d.moves == _moved_arcs(g, h, d.physical) <= 2
    _ends_ok(d.new, h.degree)
    assert d.new.to_topology().same_arcs(Topology(g.n, d.physical[h.src], d.physical[h.dst]))
    kept = {tuple(r) for r in d.new.rows.tolist()} & {tuple(r) for r in old.rows.tolist()}
    assert len(kept) == old.num_rows - d.removed.shape[0]


def test_diff_between_different_duplex_topologies():
    old_t, new_t = circulant(16, [3, 4]), circulant(16, [1, 4])
    d = diff_plans(plan_patch_panel(old_t), new_t)
    _ends_ok(d.new, 4)
    assert np.all(d.new.kinds == DUPLEX)
    assert d.new.to_topology().same_arcs(
        Topology(16, d.physical[new_t.src], d.physical[new_t.dst]))
    # every kept cable carries two arcs shared by both topologies
    assert d.moves == d.added.shape[0] == d.removed.shape[0]
    assert 2 * d.moves == _moved_arcs(old_t, new_t, d.physical)


def test_cli_patch_panel_and_diff(tmp_path, capsys):
    from topofinder.cli.main import main
    old = tmp_path / "old.csv"
    assert main(["export", "C(16,{3,4})", "--what", "patch-panel", "--panel-size", "16",
                 "-o", str(old)]) == 0
    plan = read_plan(old)
    assert plan.num_panels == 4 and plan.to_topology().same_arcs(circulant(16, [3, 4]))
    assert main(["export", "C(16,{3,4})", "--what", "patch-panel", "--diff", str(old)]) == 0
    out, err = capsys.readouterr()
    assert "0 fibres to move" in err and out.strip() == "action," + ",".join(HEADER)
    # C(16,{1,4}) is isomorphic to C(16,{3,4}) (0 moves); C(16,{1,2}) is not
    assert main(["export", "C(16,{1,2})", "--what", "patch-panel", "--diff", str(old)]) == 0
    out, err = capsys.readouterr()
    moves = int(err.split("patch-panel diff: ")[1].split()[0])
    rows = out.strip().splitlines()[1:]
    assert moves == sum(r.startswith("add,") for r in rows) > 0
    assert main(["export", "C(16,{3,4})", "--what", "patch-panel", "--panel-size", "5"]) == 2
    assert "even" in capsys.readouterr().err
