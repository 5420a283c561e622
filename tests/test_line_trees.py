"""Uniform-entry trees on line graphs: d arc-disjoint arborescences per root, every in-arc of
every other node used once, so each link carries (N−1)/d shards and τ = (N−1)/N (checked by
the independent validator and by the per-root arc counts)."""

from collections import Counter
from fractions import Fraction

import pytest

from topofinder.model.operations import line_graph
from topofinder.families import circulant, complete
from topofinder.scoring.trees.line_trees import line_graph_trees
from topofinder.scoring.trees.tree_collectives import collective_trees
from topofinder.model.tree_schedule import problems


@pytest.mark.parametrize("base, times", [(circulant(16, [3, 4]), 1), (circulant(16, [3, 4]), 2),
                                         (complete(4), 2), (circulant(9, [1, 2]), 1)],
                         ids=lambda x: getattr(x, "expr", str(x)))
def test_uniform_entry_trees_are_bandwidth_optimal(base, times):
    sched = line_graph_trees(base, times)
    topo = sched.topology
    n, d = topo.n, topo.degree
    assert topo.same_arcs(line_graph(base, times))
    assert problems(sched, Fraction(n - 1, n)) == []
    assert sched.tau() == Fraction(n - 1, n)
    per_root = {}
    for t in sched.trees:
        per_root.setdefault(t.root, Counter()).update(t.edges)
    for r, used in per_root.items():                      # each arc once, none into the root
        assert len(used) == topo.num_arcs - d and set(used.values()) == {1}
        assert all(w != r for _, w in used)


def test_export_path_uses_them_for_line_graph_expressions():
    from topofinder.families.build import load_topology

    topo = load_topology("L^2(C(16,{3,4}))")
    sched = collective_trees(topo, "allgather")
    assert sched.method == "line-graph-uniform-entry"
    rs = collective_trees(topo, "reduce-scatter")
    assert problems(rs, Fraction(255, 256)) == []
