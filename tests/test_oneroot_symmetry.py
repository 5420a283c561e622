"""Multi-port broadcast reduced by the root's stabiliser (issue 30; docs/algorithms.md "One-root
collectives"): one max-flow per orbit of the stabiliser on the destinations gives the same TP
as one per destination (on vertex-transitive, non-transitive and capacity-weighted graphs,
several roots), the orbit counts match theory (Hypercube(d): d Hamming-weight classes; K(n):
one; the undirected n-cycle: n/2 distance classes), and max-flows are constant on orbits."""

import numpy as np
import pytest

from topofinder.families.build import load_topology
from topofinder.scoring.oneroot.platform import from_topology, make_platform
from topofinder.scoring.oneroot.steady import (maxflows, multiport_broadcast,
                                               stabiliser_representatives)

GRAPHS = [("C(12,{1,3})", 0), ("Hypercube(4)", 5), ("K(6)", 2), ("Torus(4,5)", 7),
          ("Pi(3,16)", 0), ("Pi(2,12)", 5), ("Kautz(2,3)", 4), ("C(10,{1,2,5})", 3),
          ("L(K(4))", 0), ("Torus(3,3,3)", 13), ("DBJ(2,4)", 1), ("UniRing(2,9)", 4)]


@pytest.mark.parametrize("expr,root", GRAPHS)
def test_reduced_equals_unreduced(expr, root):
    pl = from_topology(load_topology(expr), root, "multi")
    reduced, full = multiport_broadcast(pl), multiport_broadcast(pl, symmetry=False)
    assert reduced.value == full.value
    side = np.zeros(pl.n, bool)
    side[reduced.certificate["source_side"]] = True
    assert side[root] and int(pl.cap[side[pl.src] & ~side[pl.dst]].sum()) == reduced.value


def _weighted_circulant(n, weights, root):
    """Arcs v → v ± s of capacity weights[s]: the dihedral symmetry keeps the capacities."""
    arcs = [(v, (v + sign * s) % n, c) for v in range(n) for s, c in weights.items()
            for sign in (1, -1)]
    s, d, c = zip(*arcs)
    return make_platform(n, s, d, c, root, "multi")


@pytest.mark.parametrize("n,weights,root", [(10, {1: 2, 3: 1}, 0), (12, {1: 1, 4: 3}, 5),
                                            (9, {1: 3, 2: 1}, 2)])
def test_capacities_kept(n, weights, root):
    pl = _weighted_circulant(n, weights, root)
    assert multiport_broadcast(pl).value == multiport_broadcast(pl, symmetry=False).value
    assert stabiliser_representatives(pl).size == n // 2      # v and 2·root − v pair up


@pytest.mark.parametrize("expr,orbits", [("Hypercube(5)", 5), ("K(7)", 1),
                                         ("C(14,{1})", 7), ("C(15,{1})", 7)])
def test_orbit_counts_from_theory(expr, orbits):
    pl = from_topology(load_topology(expr), 3, "multi")
    reps = stabiliser_representatives(pl)
    assert reps.size == orbits and 3 not in reps.tolist()


@pytest.mark.parametrize("expr", ["Torus(4,5)", "C(12,{1,3})", "L(K(4))"])
def test_maxflow_constant_on_orbits(expr):
    from topofinder.scoring.symmetry import automorphism_group

    pl = from_topology(load_topology(expr), 1, "multi")
    label = automorphism_group(pl.n, pl.src, pl.dst, pl.cap, fixed=1).orbits()
    flows = {v: maxflows(pl, pl.cap, [v])[0] for v in range(pl.n) if v != 1}
    for v, f in flows.items():
        assert all(flows[u] == f for u in flows if label[u] == label[v])
