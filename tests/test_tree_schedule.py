"""Tree-flow schedule model (DESIGN §10): time from link loads, JSON, independent validator."""

from fractions import Fraction

import pytest

from topofinder.errors import TopofinderError
from topofinder.families import bi_ring, complete, uni_ring
from topofinder.model.topology import Topology
from topofinder.model.tree_schedule import Tree, TreeSchedule, problems, validate


def ring_paths(n: int) -> TreeSchedule:
    """On UniRing(1,n) the only spanning out-tree of root r is the path r→r+1→…"""
    topo = uni_ring(1, n)
    return TreeSchedule(topo, [Tree(r, 1, [((r + i) % n, (r + i + 1) % n) for i in range(n - 1)])
                               for r in range(n)])


def stars(topo: Topology) -> TreeSchedule:
    n = topo.n
    return TreeSchedule(topo, [Tree(r, 1, [(r, w) for w in range(n) if w != r])
                               for r in range(n)])


def test_ring_paths_are_bandwidth_optimal():
    # every link carries the shards of n−1 roots: τ = (d/N)(N−1) = (N−1)/N with d = 1
    s = ring_paths(6)
    assert problems(s) == []
    assert s.tau() == Fraction(5, 6)
    assert s.heights() == [5] * 6


def test_star_trees_on_complete_graph():
    # each link u→w carries only u's shard: τ = (d/N)·1 = (m−1)/m, height 1
    s = stars(complete(5))
    assert problems(s) == []
    assert s.tau() == Fraction(4, 5)
    assert s.heights() == [1] * 5


def test_multi_arc_capacity_divides_the_load():
    # BiRing(4,4): two parallel links each way (capacity 2); clockwise paths put 3 shards on
    # each clockwise link: τ = (4/4)·3/2
    topo = bi_ring(4, 4)
    s = TreeSchedule(topo, [Tree(r, 1, [((r + i) % 4, (r + i + 1) % 4) for i in range(3)])
                            for r in range(4)])
    assert s.tau() == Fraction(3, 2)
    # split every shard half clockwise, half counter-clockwise: 3/2 shards per link
    both = [Tree(r, Fraction(1, 2), [((r + s * i) % 4, (r + s * (i + 1)) % 4) for i in range(3)])
            for r in range(4) for s in (1, -1)]
    assert TreeSchedule(topo, both).tau() == Fraction(3, 4)
    assert problems(TreeSchedule(topo, both), Fraction(3, 4)) == []


def test_validator_finds_each_defect():
    good = ring_paths(4)
    t0 = good.trees[0]
    missing_arc = Tree(0, 1, [(0, 2), (2, 3), (0, 1)])           # 0→2 is not a link
    assert any("not a link" in p for p in
               problems(TreeSchedule(good.topology, (missing_arc,) + good.trees[1:])))
    short = Tree(0, 1, t0.edges[:-1])                              # 2 edges: misses node 3
    found = problems(TreeSchedule(good.topology, (short,) + good.trees[1:]))
    assert any("reaches 3 of 4" in p for p in found) and any("2 edges, a spanning tree has 3" in p for p in found)
    half = Tree(0, Fraction(1, 2), t0.edges)                       # weights sum to 1/2
    assert any("root 0" in p for p in problems(TreeSchedule(good.topology,
                                                             (half,) + good.trees[1:])))
    no_root = TreeSchedule(good.topology, good.trees[1:])          # node 0 never broadcasts
    assert any("root 0" in p for p in problems(no_root))
    k4 = complete(4)
    two_parents = Tree(0, 1, [(0, 1), (0, 2), (1, 2)])
    assert any("more than one parent" in p for p in
               problems(TreeSchedule(k4, (two_parents,) + stars(k4).trees[1:])))
    cycle = Tree(0, 1, [(0, 1), (2, 3), (3, 2)])                   # 2,3 cut off from the root
    assert any("reaches 2 of 4" in p for p in
               problems(TreeSchedule(k4, (cycle,) + stars(k4).trees[1:])))


def test_claimed_time_is_checked_against_link_loads():
    s = ring_paths(4)                                              # true τ = 3/4
    assert problems(s, Fraction(3, 4)) == []
    over = problems(s, Fraction(2, 3))
    assert len(over) == 4 and all("exceeds" in p for p in over)
    with pytest.raises(TopofinderError, match="invalid tree schedule"):
        validate(s, Fraction(2, 3))


def test_json_round_trip_and_shape():
    s = ring_paths(5)
    doc = s.to_dict()
    assert doc["kind"] == "trees" and doc["num_nodes"] == 5 and doc["collective"] == "allgather"
    assert doc["trees"][0] == {"root": 0, "weight": "1/1",
                               "edges": [[0, 1], [1, 2], [2, 3], [3, 4]]}
    assert doc["tau_exact"] == "4/5"
    back = TreeSchedule.from_json(s.to_json(), s.topology)
    assert back.trees == s.trees and back.tau() == s.tau()


@pytest.mark.parametrize("text, message", [
    ("not json", "not valid JSON"),
    ('{"kind": "steps", "num_nodes": 4, "trees": []}', "kind"),
    ('{"kind": "trees", "num_nodes": 7, "trees": []}', "N = 4"),
    ('{"kind": "trees", "num_nodes": 4, "trees": [{"root": 0}]}', "malformed"),
    ('{"kind": "trees", "num_nodes": 4, "trees": [{"root": 0, "weight": "1/0", "edges": []}]}',
     "malformed"),
])
def test_bad_json_is_a_user_error(text, message):
    with pytest.raises(TopofinderError, match=message):
        TreeSchedule.from_json(text, uni_ring(1, 4))


def test_time_rejects_edges_that_are_not_links():
    topo = uni_ring(1, 3)
    with pytest.raises(TopofinderError, match="not a link"):
        TreeSchedule(topo, [Tree(0, 1, [(0, 2), (0, 1)])]).tau()
