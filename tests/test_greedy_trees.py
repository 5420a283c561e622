"""The breadth-first front end to tree packing: when it completes, the trees are valid and
optimal (checked by the independent validator at T_B^FC); when stuck it says so."""


from topofinder.scoring.links import Links
from topofinder.scoring.trees.forestcoll import throughput_optimum, tree_parameters
from topofinder.families import generalized_kautz
from topofinder.model.operations import line_graph
from topofinder.families import circulant
from topofinder.scoring.trees.greedy_trees import greedy_pack
from topofinder.model.tree_schedule import Tree, TreeSchedule, problems
from fractions import Fraction


def _pack(topo):
    opt = throughput_optimum(topo)
    p = tree_parameters(topo, opt)
    links = Links.of(topo)
    g = links.cap * p.U.numerator // p.U.denominator
    return opt, p, greedy_pack(topo.n, links.tail, links.head, g, p.k)


def test_greedy_trees_are_optimal_where_links_have_slack():
    topo = generalized_kautz(4, 256)      # 4 self-loop nodes bind; the others have slack
    opt, p, packed = _pack(topo)
    assert packed is not None
    sched = TreeSchedule(topo, [Tree(r, Fraction(m, p.k), e) for r, m, e in packed])
    assert problems(sched, opt.tau) == []
    assert sched.tau() == opt.tau


def test_greedy_gives_up_on_a_fully_tight_fabric():
    _, _, packed = _pack(line_graph(circulant(16, [3, 4]), 2))
    assert packed is None
