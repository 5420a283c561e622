"""First-receipt trees of a step schedule: valid spanning out-trees (independent validator)
whose pipelined time never exceeds the step schedule's τ (Σ_t max ≥ max Σ_t), chunked
schedules (P > 1) included; equal to T_B^FC where BFB is optimal."""

from fractions import Fraction

import pytest

from topofinder.scoring.allgather.bfb import bfb_schedule
from topofinder.scoring.trees.forestcoll import optimal_trees, throughput_optimum
from topofinder.families import circulant, generalized_kautz, hamming, hypercube, torus
from topofinder.scoring.trees.step_trees import trees_from_steps
from topofinder.model.tree_schedule import problems


@pytest.mark.parametrize("topo", [torus(3, 4), circulant(10, [1, 3]), hypercube(3),
                                  generalized_kautz(2, 12), hamming(2, 3)], ids=str)
def test_first_receipt_trees(topo):
    steps = bfb_schedule(topo)
    trees = trees_from_steps(steps)
    assert problems(trees) == []
    assert trees.tau() <= steps.tau
    roots = {t.root for t in trees.trees}
    assert roots == set(range(topo.n))
    assert all(sum(t.weight for t in trees.trees if t.root == r) == 1 for r in roots)


def test_chunked_schedule_gives_several_trees_per_root():
    topo = torus(3, 4)
    steps = bfb_schedule(topo)
    assert steps.shard_chunks > 1
    trees = trees_from_steps(steps)
    assert len(trees.trees) > topo.n
    assert trees.tau() == throughput_optimum(topo).tau == Fraction(11, 12)


def test_optimal_trees_takes_them_only_when_bfb_is_optimal():
    assert optimal_trees(torus(3, 4)).method == "bfb-first-receipt"
    pi = generalized_kautz(2, 12)                      # BFB 7/6 > T_B^FC 11/12
    assert optimal_trees(pi).method != "bfb-first-receipt"
