"""Degraded fabrics (model/failures.py) and the failure survey (resilience/survey.py): the
orbit-reduced distribution of single failures equals an exhaustive loop over every failure,
built here independently (arc deletion by index, node deletion by renumbering)."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import networkx as nx
import numpy as np
import pytest

from topofinder.api import load
from topofinder.errors import TopofinderError
from topofinder.families.build import load_topology
from topofinder.model.failures import Failure, degrade, parse_failure, split_expression
from topofinder.model.topology import Topology
from topofinder.resilience.survey import survey
from topofinder.scoring.allgather.bfb import bfb_score
from topofinder.scoring.symmetry import group_elements, topology_group
from topofinder.scoring.trees.forestcoll import tau_fc
from topofinder.workload.cost import Workload

SMALL = ["C(16,{1,6})", "Torus(4,4)", "Pi(4,32)", "Pi(2,12)", "DBJ(2,4)", "Kautz(2,3)", "K(5)",
         "Hypercube(3)", "DC(9,{1,3})", "UniRing(2,6)", "BiRing(4,6)", "Aff(16,7,{5,11})",
         "Diamond", "DistReg(Petersen)", nx.house_graph(), nx.path_graph(5)]


def _scores(h: Topology):
    """(T_L, τ, τ_rs, τ_fc) of a fabric by the scorers themselves, None when disconnected."""
    if not h.strongly_connected:
        return None
    ag, rs = bfb_score(h), bfb_score(h.transpose())
    return ag.T_L, ag.tau, rs.tau, tau_fc(h)


def _without_arcs(g: Topology, drop) -> Topology:
    keep = np.ones(g.num_arcs, bool)
    keep[list(drop)] = False
    return Topology(g.n, g.src[keep], g.dst[keep])


def _without_node(g: Topology, v: int) -> Topology:
    keep = (g.src != v) & (g.dst != v)
    new = np.arange(g.n) - (np.arange(g.n) > v)
    return Topology(g.n - 1, new[g.src[keep]], new[g.dst[keep]])


def _exhaustive_links(g: Topology, duplex: bool) -> Counter:
    out = Counter()
    for i in range(g.num_arcs):
        u, w = int(g.src[i]), int(g.dst[i])
        if u == w or (duplex and u > w):
            continue
        drop = [i]
        if duplex:        # the cable's other direction: a reverse arc not yet paired
            rev = np.flatnonzero((g.src == w) & (g.dst == u))
            fwd = np.flatnonzero((g.src == u) & (g.dst == w))
            drop.append(int(rev[list(fwd).index(i)]))
        out[_scores(_without_arcs(g, drop))] += 1
    return out


def _from_table(section: dict) -> Counter:
    out = Counter()
    for row in section["table"]:
        key = None if row.get("disconnects") else (
            row["T_L"], _frac(row["tau_exact"]), _frac(row["tau_rs_exact"]),
            _frac(row["tau_fc_exact"]))
        out[key] += row["orbit_size"]
    return out


def _frac(text):
    from fractions import Fraction
    return Fraction(text)


@pytest.mark.parametrize("expr", SMALL, ids=str)
def test_orbit_reduction_equals_the_exhaustive_loop(expr):
    """(Undirected graphs whose automorphisms never reverse some edge, like a path, check
    that a cable's orbit joins the directed orbits of both its directions.)"""
    g = load(expr)
    doc = survey(g)
    duplex = doc["cabling"] == "duplex"
    assert duplex == bool(g.bidirectional)
    assert _from_table(doc["single_links"]) == _exhaustive_links(g, duplex)
    assert _from_table(doc["single_nodes"]) == Counter(_scores(_without_node(g, v))
                                                      for v in range(g.n))
    assert doc["single_nodes"]["failures"] == g.n
    # no orbit is split: as many as the whole group (enumerated) has on links and nodes
    elements = group_elements(g.n, topology_group(g).generators, 100_000)
    arcs = {(int(u), int(w)) for u, w in zip(g.src, g.dst) if u != w}
    key = (lambda u, w: (min(u, w), max(u, w))) if duplex else (lambda u, w: (u, w))
    link_orbits = {frozenset(key(int(h[u]), int(h[w])) for h in elements) for u, w in arcs}
    assert doc["single_links"]["orbits"] == len(link_orbits)
    assert doc["single_nodes"]["orbits"] == len({frozenset(elements[:, v]) for v in range(g.n)})


def test_simplex_cabling_of_a_bidirectional_fabric_fails_single_fibres():
    g = load_topology("Torus(4,4)")
    doc = survey(g, cabling="simplex", nodes=0)
    assert doc["single_links"]["unit"] == "fibre"
    assert _from_table(doc["single_links"]) == _exhaustive_links(g, False)


@pytest.mark.parametrize("expr", ["C(8,{1,2})", "Pi(2,8)", "K(4)"])
def test_worst_pair_by_orbits_equals_the_worst_of_all_pairs(expr):
    g = load_topology(expr)
    w = Workload()
    doc = survey(g, w, links=2, nodes=2)
    assert doc["pair_links"]["method"].startswith("exhaustive")

    def time(h):
        s = _scores(h)
        return float("inf") if s is None else w.collective_time(2 * s[0], float(s[1] + s[2]))
    arcs = [i for i in range(g.num_arcs) if g.src[i] != g.dst[i]]
    if g.bidirectional:        # cables: one arc u<w and its first reverse partner
        arcs = [(i, int(np.flatnonzero((g.src == g.dst[i]) & (g.dst == g.src[i]))[0]))
                for i in arcs if g.src[i] < g.dst[i]]
        worst = max(time(_without_arcs(g, a + b)) for a, b in combinations(arcs, 2))
    else:
        worst = max(time(_without_arcs(g, p)) for p in combinations(arcs, 2))
    found = doc["pair_links"]["worst"]
    assert (found.get("allreduce_s") or float("inf")) == pytest.approx(worst)
    worst_nodes = max(time(_without_node(_without_node(g, b), a))
                      for a, b in combinations(range(g.n), 2))
    found = doc["pair_nodes"]["worst"]
    assert (found.get("allreduce_s") or float("inf")) == pytest.approx(worst_nodes)


def test_worst_median_best_are_ordered_and_name_the_critical_orbit():
    doc = survey(load_topology("Pi(4,32)"))
    for key in ("single_links", "single_nodes"):
        s = doc[key]
        assert s["worst"]["regression"] >= s["median"]["regression"] >= s["best"]["regression"]
        assert s["worst"]["failure"] in s["critical"]
        assert sum(r["orbit_size"] for r in s["table"]) == s["failures"]


def test_sampled_pairs_say_so():
    doc = survey(load_topology("Pi(4,32)"), links=2, nodes=0, pair_budget=20)
    assert doc["pair_links"]["method"].startswith("sampled: 20 of")
    assert doc["pair_links"]["evaluated"] == 20


def test_degrade_keeps_names_and_removes_exactly_the_failed_elements():
    g = load_topology("C(16,{1,6})")
    h = degrade(g, parse_failure("0<->1, 5"))
    assert h.n == 15 and h.labels[5] == "6" and "5" not in h.labels
    assert h.num_arcs == g.num_arcs - 2 - 8
    assert load_topology(h.expr).same_arcs(h)
    assert split_expression(h.expr) == ("C(16,{1,6})", Failure(cables=((0, 1),), nodes=(5,)))
    assert not np.any((h.src == 0) & (h.dst == 1))


@pytest.mark.parametrize("text, message", [
    ("Fail(DC(8,{1}); 0->1)", "disconnects the fabric"),
    ("Fail(C(16,{1,6}); 0->2)", "there is not a fibre 0->2"),
    ("Fail(C(16,{1,6}); 16)", "node 16 is out of range 0..15"),
    ("Fail(C(16,{1,6}); 0-1)", "bad failure '0-1'"),
    ("Fail(UniRing(2,4); 0->1, 0->1)", "disconnects"),
    ("Fail(UniRing(2,4); 0->1, 0->1, 0->1)", "not a further fibre 0->1"),
])
def test_bad_failures_are_one_clear_error(text, message):
    with pytest.raises(TopofinderError, match=message):
        load_topology(text)
