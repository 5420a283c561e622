"""Replay by symmetry (topofinder.model.symmetric) against full replay: one source per orbit
of a checked free abelian automorphism group gives the same verdict, T_L, step loads and τ as
replaying every source of the extended schedule, and a planted wrong send fails both."""

from __future__ import annotations

import numpy as np
import pytest

from topofinder.families.build import parse
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import (build_schedule, build_topology, recipe_generators,
                                      symmetric_allgather)
from topofinder.model.schedule import ScheduleError, StepSchedule, validate
from topofinder.model.symmetric import (
    OrbitSchedule, _elements, check_group, expand, line_graph_action, orbit_schedule_of, orbits,
    product_action, replay_by_symmetry, rotation, translations, transversal,
)
from topofinder.scoring.allgather.ring_and_two_tree import ring_allgather, ring_orbit
from topofinder.scoring.allgather.bfb import bfb_schedule


def _circulant(expr, m):
    return parse(expr), [rotation(m)]


def _line(expr, m, times=1):
    g = parse(expr)
    gens = [rotation(m)]
    for _ in range(times):
        gens = line_graph_action(g, gens)
        g = parse(f"L({g.expr})")
    return g, gens


def _product(left, right, ml, mr):
    topo = parse(f"{left} x {right}")
    return topo, product_action([ml, mr], [[rotation(ml)], [rotation(mr)]])


#: (topology, generators of a free abelian automorphism group), N ≤ 4096
CASES = {
    "C(16,{1,6})": lambda: _circulant("C(16,{1,6})", 16),
    "C(64,{1,7,21})": lambda: _circulant("C(64,{1,7,21})", 64),
    "DC(27,{1,3})": lambda: _circulant("DC(27,{1,3})", 27),
    "ShiftedRing(6,200)": lambda: _circulant("ShiftedRing(6,200)", 200),
    "Torus(8,8)": lambda: (parse("Torus(8,8)"),
                           product_action([8, 8], [[rotation(8)], [rotation(8)]])),
    "Torus(4,4,4)": lambda: (parse("Torus(4,4,4)"),
                             product_action([4, 4, 4], [[rotation(4)]] * 3)),
    "L(C(16,{1,6}))": lambda: _line("C(16,{1,6})", 16),
    "L^2(C(8,{1,3}))": lambda: _line("C(8,{1,3})", 8, 2),
    "L(DC(32,{1,5}))": lambda: _line("DC(32,{1,5})", 32),
    "C(16,{1,6}) x C(8,{1,3})": lambda: _product("C(16,{1,6})", "C(8,{1,3})", 16, 8),
    "L(C(64,{1,7}))": lambda: _line("C(64,{1,7})", 64),
    "C(1024,{1,32})": lambda: _circulant("C(1024,{1,32})", 1024),
}


CASES["C(4096,{1,64})"] = lambda: _circulant("C(4096,{1,64})", 4096)      # slow: 17M rows


def _orbit(name):
    """The representatives' sends of the topology's BFB schedule, as an orbit schedule (its
    extension is a valid schedule: each source's sends are an automorphism's image of a
    valid broadcast)."""
    topo, gens = CASES[name]()
    full = bfb_schedule(topo)
    reps = check_group(topo, gens).reps
    rows = full.sends[np.isin(full.sends[:, 1], reps)]
    return OrbitSchedule(topo, full.shard_chunks, rows, tuple(gens), method="bfb")


@pytest.mark.parametrize("name", sorted(CASES) + [
    pytest.param("C(4096,{1,64})", marks=pytest.mark.slow)])
def test_symmetry_replay_agrees_with_full_replay(name):
    orbit = _orbit(name)
    assert orbit.topology.n <= 4096
    replay_by_symmetry(orbit)
    full = expand(orbit)
    assert full.num_sends == orbit.num_sends * orbit.topology.n // orbit.action.reps.size
    validate(full)
    assert (orbit.num_steps, orbit.step_loads, orbit.tau) == \
        (full.num_steps, full.step_loads, full.tau)
    assert orbit_schedule_of(full, orbit.generators).num_sends == orbit.num_sends


@pytest.mark.parametrize("name", ["C(16,{1,6})", "L(C(16,{1,6}))", "Torus(8,8)",
                                  "C(16,{1,6}) x C(8,{1,3})"])
def test_planted_wrong_send_fails_both(name):
    orbit = _orbit(name)
    s = orbit.sends.copy()
    i = int(np.flatnonzero(s[:, 0] >= 2)[0])      # a forwarded chunk, sent before it arrives
    s[i, 0] = 1
    bad = OrbitSchedule(orbit.topology, orbit.shard_chunks, s, orbit.generators)
    with pytest.raises(ScheduleError, match="does not hold"):
        replay_by_symmetry(bad)
    with pytest.raises(ScheduleError, match="does not hold"):
        validate(expand(bad))
    dropped = OrbitSchedule(orbit.topology, orbit.shard_chunks, np.delete(orbit.sends, i, 0),
                            orbit.generators)
    with pytest.raises(ScheduleError):
        replay_by_symmetry(dropped)
    with pytest.raises(ScheduleError):
        validate(expand(dropped))


def test_a_wrong_send_outside_the_representatives_breaks_equivariance():
    full = expand(_orbit("C(16,{1,6})"))
    s = full.sends.copy()
    i = int(np.flatnonzero((s[:, 1] != 0) & (s[:, 0] >= 2))[0])
    s[i, 0] = 1
    planted = StepSchedule(full.topology, full.shard_chunks, s)
    with pytest.raises(ScheduleError, match="does not hold"):
        validate(planted)
    with pytest.raises(ScheduleError, match="not equivariant"):
        orbit_schedule_of(planted, [rotation(16)])


@pytest.mark.parametrize("d, m", [(2, 9), (4, 64), (6, 35), (8, 100)])
def test_ring_schedule_is_equivariant_and_replays_from_one_source(d, m):
    full = ring_allgather(d, m)
    orbit = ring_orbit(d, m)
    assert orbit_schedule_of(full, orbit.generators).num_sends == orbit.num_sends
    replay_by_symmetry(orbit)
    assert (orbit.num_steps, orbit.tau) == (m - 1, (full.tau)) == (m - 1, type(full.tau)(m - 1, m))


def test_group_checks():
    topo = parse("K(4)")
    with pytest.raises(ScheduleError, match="not an automorphism"):
        check_group(parse("C(8,{1,3})"), [np.array([1, 0, 2, 3, 4, 5, 6, 7])])
    swap01 = np.array([1, 0, 2, 3])
    both = np.array([1, 0, 3, 2])
    with pytest.raises(ScheduleError, match="does not act freely"):
        check_group(topo, [swap01, both])           # (2 3) = swap01·both fixes node 0
    with pytest.raises(ScheduleError, match="commute"):
        check_group(topo, [np.array([1, 2, 3, 0]), np.array([1, 0, 2, 3])])
    with pytest.raises(ScheduleError, match="differ in size"):
        check_group(topo, [swap01])


def test_recipes_without_a_known_group_are_not_symmetric():
    assert symmetric_allgather(from_expression("Pi(4,64)")) is None


def test_line_graph_action_on_parallel_arcs():
    """C(4,{1,2}) has two arcs u→u+2: the rotation lifted to L(C(4,{1,2})) is a free
    automorphism group (check_group), the full line-graph schedule is equivariant under it, and
    a permutation that is no automorphism of the base is refused."""
    g = parse("C(4,{1,2})")
    gens = line_graph_action(g, [rotation(4)])
    full = build_schedule(from_expression("L(C(4,{1,2}))"))
    assert orbit_schedule_of(full, gens).num_sends * 4 == full.num_sends
    with pytest.raises(ScheduleError, match="onto"):
        line_graph_action(g, [np.array([1, 0, 2, 3])])


#: the search's orbit forms beyond line graphs of circulants (N ≤ 4096): BFB on products whose
#: factors have groups (a rotation, a line graph's lifted group, a trivial one), Cartesian
#: powers of orbit schedules, line graphs of products
NEW_FORMS = ["C(5,{1}) x Aff(40,29,{3,5})", "DistReg(4,9) x C(15,{2,3})",
             "Aff(16,5,{3,7}) x C(9,{1,2})", "UniRing(1,4) x UniRing(1,5) x Pi(2,6)",
             "L(UniRing(1,3) x UniRing(1,5))", "L(C(5,{1,2}))^2", "C(16,{1,6})^2",
             "L(C(4,{1,2})) x C(3,{1})", "C(64,{1,7,21})", "L(C(8,{1,3}))^2"]


#: line graphs of circulants (C(4,{1,2}) and C(6,{1,3}) have parallel arcs, so L's group maps
#: the j-th parallel arc to the j-th)
LINE_FORMS = ["C(16,{1,6})", "L(C(16,{1,6}))", "L^3(C(16,{1,6}))", "L^2(C(64,{1,14}))",
              "L(DC(32,{1,5}))", "L^2(C(4,{1,2}))", "L(C(6,{1,3}))"]


@pytest.mark.parametrize("expr", LINE_FORMS + NEW_FORMS)
def test_search_orbit_forms_equal_their_full_replay(expr):
    """finder.verify.symmetric_allgather (search's replay by symmetry) of line graphs,
    products, powers and line graphs of products: replayed by symmetry, its extension
    replayed in full, and the named construction built and replayed in full agree on T_L and
    τ (BFB's optimum for the products)."""
    recipe = from_expression(expr)
    orbit = symmetric_allgather(recipe)
    assert orbit is not None and orbit.topology.n <= 4096
    assert orbit.action.reps.size < orbit.topology.n            # a real reduction
    replay_by_symmetry(orbit)
    full = build_schedule(recipe)
    validate(full)
    extended = expand(orbit)
    validate(extended)
    assert (orbit.num_steps, orbit.tau) == (full.num_steps, full.tau) == \
        (extended.num_steps, extended.tau)


@pytest.mark.parametrize("expr", ["C(5,{1}) x Aff(40,29,{3,5})", "L(C(5,{1,2}))^2",
                                  "L(C(4,{1,2})) x C(3,{1})"])
def test_planted_wrong_send_in_a_new_form_fails_both(expr):
    orbit = symmetric_allgather(from_expression(expr))
    s = orbit.sends.copy()
    i = int(np.flatnonzero(s[:, 0] >= 2)[0])
    s[i, 0] = 1                                    # forwarded before it arrives
    bad = OrbitSchedule(orbit.topology, orbit.shard_chunks, s, orbit.generators)
    with pytest.raises(ScheduleError, match="does not hold"):
        replay_by_symmetry(bad)
    with pytest.raises(ScheduleError, match="does not hold"):
        validate(expand(bad))


def test_reduce_scatter_of_a_non_reversible_product_by_symmetry():
    """The reduce-scatter price of a point replayed by symmetry on a topology that is not
    reverse-symmetric (BFB on G^T under G's group) equals the full BFB reduce-scatter."""
    from topofinder.finder.growth import Candidate
    from topofinder.finder.verify import _symmetric_point
    from topofinder.model.collectives import Collective

    expr = "Aff(16,5,{3,7}) x C(9,{1,2})"
    recipe = from_expression(expr)
    orbit = symmetric_allgather(recipe)
    assert not orbit.topology.bidirectional
    c = Candidate(recipe, orbit.topology.n, orbit.topology.degree, orbit.num_steps, orbit.tau)
    point = _symmetric_point(c)
    rs = bfb_schedule(orbit.topology, collective=Collective.REDUCE_SCATTER)
    validate(rs)
    assert point[3] == "symmetry" and point[5:] == (rs.num_steps, rs.tau)


def test_bfb_receiver_plans_are_the_generator_on_all_receivers():
    """bfb.bfb_orbit_plans over every node is the full generator (the orbit forms above test
    it on representatives, with distances through the group)."""
    from topofinder.scoring.allgather.bfb import bfb_orbit_plans

    g = parse("Pi(3,50)")
    full = bfb_schedule(g)
    p, rows = bfb_orbit_plans(g, np.arange(g.n))
    assert p == full.shard_chunks and np.array_equal(rows, full.sends)


@pytest.mark.parametrize("expr", ["C(5,{1}) x Aff(40,29,{3,5})", "L(C(5,{1,2}))^2",
                                  "L(C(4,{1,2})) x C(3,{1})"])
def test_distance_histogram_by_orbits_equals_every_source(expr):
    from topofinder.model.symmetric import orbit_distance_histogram

    orbit = symmetric_allgather(from_expression(expr))
    assert np.array_equal(orbit_distance_histogram(orbit.topology, orbit.action),
                          parse(expr).distance_histogram)


def test_check_group_memory_is_linear_in_n():
    """The freeness check holds one row per node of r_1's orbit (N entries in all), not one
    per node of the graph: L^5(C(4,{1,2})) (N = 4096, 1024 orbits of Z_4) needed an N × orbits
    table (34 MB; 8.6 GB for L^7 at N = 65536, which killed sweep cells)."""
    import tracemalloc

    recipe = from_expression("L^5(C(4,{1,2}))")
    topo, gens = build_topology(recipe), recipe_generators(recipe)
    tracemalloc.start()
    try:
        action = check_group(topo, gens)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (topo.n, action.reps.size) == (4096, 1024)
    assert peak < 8 * topo.n * action.reps.size // 4


@pytest.mark.parametrize("expr", ["L(UniRing(1,3) x UniRing(1,5))", "L(C(4,{1,2}))",
                                  "L(Aff(8,3,{1,3}) x C(5,{1}))", "C(6,{1}) x C(4,{1})"])
def test_transversal_inverts_every_group_element(expr):
    """transversal(n, gens)(v, ·) is the inverse of the element taking v's representative to
    v, for every v: against the elements enumerated one by one (breadth-first over the
    generators; O(n²), small n), on groups of one and two generators."""
    recipe = from_expression(expr)
    topo, gens = build_topology(recipe), recipe_generators(recipe)
    back = transversal(topo.n, gens)
    node_orbit = orbits(topo.n, gens)
    for r in np.unique(node_orbit, return_index=True)[1]:
        for v, perm in _elements(topo.n, gens, int(r)):
            assert back(v, v) == r
            assert np.array_equal(back(v, perm), np.arange(topo.n))
    v = np.arange(topo.n)
    assert np.array_equal(back(v, v), np.unique(node_orbit, return_index=True)[1][node_orbit])


@pytest.mark.parametrize("expr, step", [("Aff(64,17,{7,21,29,31})", 4), ("Aff(16,7,{5,11})", 8),
                                        ("Aff(160,101,{66,121})", 8), ("Aff(13,6,{1,5})", None),
                                        ("C(12,{1,5})", 1), ("Pi(4,200)", 40),
                                        ("Pi(4,198)", None)])
def test_translations_are_every_translation_automorphism(expr, step):
    """`translations` generates exactly the translations x ↦ x + c that map the arcs onto
    themselves (brute force over every c); for Aff(m, q, A) the least is m/gcd(m, q − 1)."""
    topo = parse(expr)
    n = topo.n
    arcs = sorted(zip(topo.src.tolist(), topo.dst.tolist()))
    auto = [c for c in range(1, n)
            if sorted(((u + c) % n, (w + c) % n) for u, w in arcs) == arcs]
    gens = translations(topo)
    assert (gens[0][0] if gens else None) == step == (auto[0] if auto else None)
    assert auto == list(range(step, n, step)) if step else auto == []


@pytest.mark.parametrize("expr", ["L(Aff(64,17,{7,21,29,31}))", "Aff(198,145,{16,20,123,187})",
                                  "L(Aff(54,29,{9,16,37,44}))", "Pi(3,96)"])
def test_translation_groups_replay_what_export_writes(expr):
    """Bases with translations (Aff, Pi: x ↦ x + c, c = m/gcd(m, q − 1)) are verified by
    symmetry, also where export writes BFB instead of the named line-graph construction:
    equal to the exported allgather (allgather_schedule) and reduce-scatter built and
    replayed in full."""
    from topofinder.finder.growth import Candidate
    from topofinder.finder import verify
    recipe = from_expression(expr)
    full = verify.allgather_schedule(recipe)
    validate(full)
    c = Candidate(recipe, full.topology.n, full.topology.degree, full.num_steps, full.tau)
    point = verify._symmetric_point(c)
    assert point is not None and point[3] == "symmetry"
    topo, t_l, tau, _, method, rs_t_l, rs_tau = point
    assert (t_l, tau, method) == (full.num_steps, full.tau, full.method)
    assert (rs_t_l, rs_tau) == verify._verified_reduce_scatter(full.topology, t_l, tau)
