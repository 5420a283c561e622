"""Reduce-scatter in-trees, allreduce RS+AG trees and LP (5) of paper 002 App. G: the cut
generation against the flow formulation of (5) written out in full, and the known relations
(LP (5) ≤ τ_RS + τ_AG; equality on a directed ring where every tree is forced)."""

import os
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from topofinder.model.files import read_topology
from topofinder.scoring.trees.forestcoll import throughput_optimum
from topofinder.families import complete, generalized_kautz, uni_ring
from topofinder.model.topology import Topology
from topofinder.scoring.trees.tree_collectives import (
    allreduce_lp, allreduce_trees, collective_trees,
)
from topofinder.model.tree_schedule import TreeSchedule, problems

DATA = os.path.join(os.path.dirname(__file__), "data")


def flow_lp5(topo) -> float:
    """LP (5) as written: one flow per (direction, sink t) with source arcs ≤ x_v."""
    m = topo.link_matrix.tocoo()
    tail, head, cap = m.row, m.col, m.data.astype(float)
    n, ne = topo.n, tail.size
    blk = ne + n
    nvar = n + 2 * ne + 2 * n * blk
    A, b, E = [], [], []
    for d in (0, 1):
        a, h = (tail, head) if d == 0 else (head, tail)
        cv = n + d * ne
        for t in range(n):
            o = n + 2 * ne + (d * n + t) * blk
            for e in range(ne):
                row = np.zeros(nvar); row[o + e] = 1; row[cv + e] = -1; A.append(row); b.append(0)
            for v in range(n):
                row = np.zeros(nvar); row[o + ne + v] = 1; row[v] = -1; A.append(row); b.append(0)
            for v in range(n):
                row = np.zeros(nvar)
                row[o + ne + v] = 1
                row[o + np.flatnonzero(h == v)] += 1
                row[o + np.flatnonzero(a == v)] -= 1
                if v == t:
                    row = -row
                    row[:n] += 1
                    A.append(row); b.append(0)
                else:
                    E.append(row)
    for e in range(ne):
        row = np.zeros(nvar); row[n + e] = 1; row[n + ne + e] = 1; A.append(row); b.append(cap[e])
    c = np.zeros(nvar); c[:n] = -1
    res = linprog(c, A_ub=sp.csr_matrix(np.array(A)), b_ub=b, A_eq=sp.csr_matrix(np.array(E)),
                  b_eq=np.zeros(len(E)), bounds=(0, None), method="highs")
    return topo.node_bandwidth / -res.fun


@pytest.mark.parametrize("topo", [uni_ring(1, 6), complete(5), generalized_kautz(2, 10),
                                  generalized_kautz(3, 9)], ids=str)
def test_cut_generation_equals_flow_lp(topo):
    assert allreduce_lp(topo).tau == pytest.approx(flow_lp5(topo), rel=1e-6)


def test_heterogeneous_lp_against_flows():
    topo = Topology(4, [0, 1, 2, 3, 0, 2, 1], [1, 2, 3, 0, 2, 0, 0], capacity=[3, 1, 2, 2, 1, 1, 2])
    assert allreduce_lp(topo).tau == pytest.approx(flow_lp5(topo), rel=1e-6)
    mi250 = read_topology(os.path.join(DATA, "mi250_1.edges"))      # GB/s capacities 50..200
    assert allreduce_lp(mi250).tau == pytest.approx(flow_lp5(mi250), rel=1e-6)


@pytest.mark.parametrize("topo", [uni_ring(1, 6), complete(5), generalized_kautz(2, 10)], ids=str)
def test_allreduce_trees_validate_and_bound(topo):
    ar = allreduce_trees(topo)
    assert ar.reduce_scatter.collective == "reduce-scatter"
    assert problems(ar.reduce_scatter) == [] and problems(ar.allgather) == []
    ag = throughput_optimum(topo).tau
    rs = throughput_optimum(topo.transpose()).tau
    assert ar.tau() == ag + rs
    assert ar.lp.tau <= float(ar.tau()) * (1 + 1e-9)


def test_ring_allreduce_is_tight():
    """On a unidirectional ring every tree is the path: LP (5) = τ_RS + τ_AG = 2(N−1)/N."""
    ar = allreduce_trees(uni_ring(1, 6))
    assert ar.tau() == Fraction(10, 6)
    assert ar.lp.tau == pytest.approx(10 / 6)


def test_in_trees_point_to_the_root_and_are_checked():
    topo = read_topology(os.path.join(DATA, "a100_1.edges"))
    rs = collective_trees(topo, "reduce-scatter")
    for t in rs.trees:
        assert all(w != t.root for u, w in t.edges if u == t.root)   # root only receives
    assert problems(rs, rs.tau()) == []
    flipped = TreeSchedule(topo, rs.trees, collective="allgather")
    assert problems(flipped) != []


def test_lp_on_switched_fabrics_is_a_lower_bound():
    """a100_1: 8 GPUs on one 300 GB/s switch. RS + AG trees without switch help: every GPU
    receives 7/8 of M twice through its 300 GB/s, τ = 7/4 M/B. The LP on G lets the switch
    aggregate and multicast: every GPU sends its M once up and receives M once down, τ = 1."""
    topo = read_topology(os.path.join(DATA, "a100_1.edges"))
    ar = allreduce_trees(topo)
    assert ar.lp.exact is False
    assert ar.tau() == Fraction(7, 4)
    assert ar.lp.tau == pytest.approx(1.0)
