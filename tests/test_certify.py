"""Verification by construction (topofinder.finder.certify, topofinder.expansions.rows): the
receiver-by-receiver rules equal the whole constructions of expansions/schedules.py, the
sampled verification agrees with full replay, and planted construction faults are caught at
the default sample size."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.expansions import rows
from topofinder.finder import certify
from topofinder.finder.recipe import apply, base
from topofinder.finder.verify import build_schedule
from topofinder.model.schedule import validate


def _canon(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


def _line(r, times=1):
    for _ in range(times):
        r = apply("line", (r,))
    return r


#: every expansion form the rules cover, at N <= 4096 (operands within reach of full replay)
FORMS = [
    _line(base("Pi(3,12)")),
    _line(base("C(10,{1,3})"), 2),
    apply("degree", (base("C(10,{1,3})"),), 3),
    apply("power", (base("Pi(3,12)"),), 2),
    apply("power", (base("UniRing(2,6)"),), 3),
    apply("degree", (_line(base("Pi(4,125)"), 1),), 2),
    apply("bi", (base("UniRing(2,6)"),)),
    _line(apply("power", (base("C(6,{1,2})"),), 2)),
]


@pytest.mark.parametrize("recipe", FORMS, ids=lambda r: r.expr)
def test_rules_equal_the_whole_construction_and_full_replay(recipe):
    """The rule's rows into every receiver are the construction's rows (same multiset); the
    full replay and the sampled verification both accept it, with the same (T_L, τ)."""
    whole = build_schedule(recipe)
    rule, _ = certify.construction_rule(recipe, 0, build_schedule)
    assert rule.shard_chunks == whole.shard_chunks
    assert np.array_equal(_canon(rule.materialise().sends), _canon(whole.sends))
    validate(whole)
    cert = certify.certify(recipe, None, None, 0, build_schedule)
    assert (cert["T_L"], Fraction(cert["tau"])) == (whole.num_steps, whole.tau)
    assert cert["sample"] == min(certify.DEFAULT_SAMPLE, whole.topology.n)


def test_rows_from_are_the_senders_rows():
    """A rank's sends (rows_from) are exactly the schedule's rows whose u is that rank."""
    recipe = apply("degree", (_line(base("Pi(4,125)"), 1),), 2)
    whole = build_schedule(recipe).sends
    rule, _ = certify.construction_rule(recipe, 0, build_schedule)
    for r in (0, 17, 999):
        assert np.array_equal(_canon(rule.rows_from([r])), _canon(whole[whole[:, 4] == r]))


def test_claim_other_than_the_theorem_is_refused():
    recipe = _line(base("C(10,{1,3})"))
    with pytest.raises(TopofinderError, match="theorems give"):
        certify.certify(recipe, 99, Fraction(1), 0, build_schedule)


def test_precondition_named_when_it_fails():
    """Def 13 needs an operand without self-loops: Pi(4,128) has some (5x = -a mod 128)."""
    with pytest.raises(TopofinderError, match="no self-loops"):
        certify.construction_rule(apply("degree", (base("Pi(4,128)"),), 2), 0, build_schedule)


def test_a_planted_fault_is_caught_small():
    recipe = _line(base("Pi(3,12)"))
    with pytest.raises(TopofinderError):
        certify.certify(recipe, None, None, 0, build_schedule, fault="line-port")


#: (recipe at N >= 4096, the faults of its outermost operators)
PLANTED = [
    (_line(base("Pi(4,1024)")), [f for f in rows.FAULTS if f.startswith("line-")]),
    (apply("degree", (_line(base("Pi(4,625)")),), 2),
     [f for f in rows.FAULTS if f.startswith("degree-")]),
    (apply("power", (base("C(64,{1,8})"),), 2), [f for f in rows.FAULTS if f.startswith("power-")]),
]


@pytest.mark.slow
@pytest.mark.parametrize("recipe,faults", PLANTED, ids=lambda x: getattr(x, "expr", "faults"))
def test_planted_faults_caught_at_the_default_sample(recipe, faults):
    """Every planted fault kind (rows.FAULTS, 14 kinds) at N >= 4096 fails the default
    sampled verification, while the fault-free construction passes it."""
    built = {}

    def build(r):                       # the operand, built and replayed once per recipe
        if r.expr not in built:
            built[r.expr] = build_schedule(r)
        return built[r.expr]

    cert = certify.certify(recipe, None, None, 0, build)
    n = certify._size(recipe)[0]
    assert n >= 4096 and cert["sample"] == certify.DEFAULT_SAMPLE
    for fault in faults:
        with pytest.raises(TopofinderError):
            certify.certify(recipe, cert["T_L"], Fraction(cert["tau"]), 0, build, fault=fault)


def test_every_fault_kind_is_exercised():
    assert len(rows.FAULTS) >= 10
    covered = {f for _, fs in PLANTED for f in fs}
    assert covered == set(rows.FAULTS)


def test_verified_by_option():
    from topofinder.api.search import verification
    assert verification("full,symmetry", None, None) is None
    assert verification("full,symmetry,construction", None, None) == (
        certify.DEFAULT_SAMPLE, certify.DEFAULT_SEED)
    assert verification("construction,full,symmetry", 64, 3) == (64, 3)
    for bad in (("full", None, None), ("full,symmetry,guess", None, None),
                ("full,symmetry,construction", 0, None), ("full,symmetry", 8, None),
                ("full,symmetry,construction", 8, -1)):
        with pytest.raises(TopofinderError):
            verification(*bad)


def test_construction_point_within_a_small_limit(monkeypatch):
    """verify_candidate's construction branch, forced at N = 4096 by a lower replay limit:
    the point carries the theorems' (T_L, τ) — equal to the full replay's — and a certificate;
    its reduce-scatter is the transposed construction's when G is not reverse-symmetric."""
    from topofinder.finder import verify
    from topofinder.finder.growth import Candidate
    recipe = _line(base("Pi(4,1024)"))
    whole = build_schedule(recipe)
    monkeypatch.setattr(verify, "REPLAY_LIMIT", 1024 * 1024 * 4)
    cand = Candidate(recipe=recipe, n=4096, d=4, t_l=whole.num_steps, tau=whole.tau)
    assert verify.unverifiable_reason(cand, construction=True) is None
    assert verify.unverifiable_reason(cand) is not None
    point = verify.verify_candidate(cand, False, (8, 1))
    assert point.verified_by == "construction" and point.certificate["sample"] == 8
    assert (point.T_L, point.tau) == (whole.num_steps, whole.tau)
    rs = point.certificate.get("reduce_scatter")
    assert point.allreduce_T_L == point.T_L + (rs["T_L"] if rs else point.T_L)


def test_the_1e5_point_is_verified_by_construction():
    """search --n 100000 --d 8 left L^2(Pi(4,3125))*2 (T_L 9) out; it is now verified by
    construction (its base, Pi(4,3125), within the replay limit)."""
    from topofinder.finder.recipe import from_expression
    from topofinder.finder.verify import by_construction
    assert by_construction(from_expression("L^2(Pi(4,3125))*2"))
    assert not by_construction(from_expression("L^3(C(16,{1,6}))"))     # replayed in full


@pytest.mark.parametrize("recipe", FORMS, ids=lambda r: r.expr)
def test_count_map_equals_the_whole_constructions_loads(recipe):
    """Rule.loads (the count map the invariants check on every node) equals the per-step
    per-link chunk counts of the whole construction's rows; the invariants pass on it."""
    from topofinder.finder import invariants
    whole = build_schedule(recipe)
    rule, _ = certify.construction_rule(recipe, 0, build_schedule)
    s, n = whole.sends, whole.topology.n
    expected = rows.aggregate(s[:, 0], s[:, 4], s[:, 5], s[:, 3] - s[:, 2], n)
    got = rule.loads(np.ones(n, np.int64))[:, :4]
    assert np.array_equal(_canon(got), expected)
    record, _ = invariants.check(rule, whole.num_steps, whole.tau)
    assert record["received_per_node"] == (n - 1) * whole.shard_chunks
    assert record["link_steps"] == expected.shape[0]


def test_rows_owned_are_the_schedules_rows_of_those_owners():
    recipe = _line(apply("power", (base("C(6,{1,2})"),), 2))
    whole = build_schedule(recipe).sends
    rule, _ = certify.construction_rule(recipe, 0, build_schedule)
    n = rule.topology.n
    rng = np.random.default_rng(3)
    w, v = rng.integers(0, n, 40), rng.integers(0, n, 40)
    keep = np.isin(whole[:, 5] * n + whole[:, 1], w * n + v)
    assert np.array_equal(_canon(rule.rows_owned(w, v)), _canon(whole[keep]))


#: (recipe at N >= 4096, the faults confined to a few nodes that its outermost operator takes)
LOCAL = [(PLANTED[0][0], ["line-first-node", "line-split-pair"]),
         (PLANTED[1][0], ["degree-last-node", "degree-last-self"])]


@pytest.mark.slow
@pytest.mark.parametrize("recipe,faults", LOCAL, ids=lambda x: getattr(x, "expr", "faults"))
def test_faults_on_a_few_nodes_are_caught_by_the_invariants_alone(recipe, faults):
    """A fault confined to fewer than 1/k of the nodes passes the exact replay of the default
    sample of k receivers, but fails the invariants on every node, and so the certificate."""
    from topofinder.finder import invariants
    from topofinder.model.schedule import ScheduleError
    built = {}

    def build(r):                       # the base, built and replayed once
        if r.expr not in built:
            built[r.expr] = build_schedule(r)
        return built[r.expr]

    cert = certify.certify(recipe, None, None, 0, build)
    t_l, tau = cert["T_L"], Fraction(cert["tau"])
    for fault in faults:
        rule, _ = certify.construction_rule(recipe, 0, build, fault)
        n = rule.topology.n
        receivers = certify.sampled(n, certify.DEFAULT_SAMPLE, certify.DEFAULT_SEED)
        for w in receivers:                       # the sample alone does not see the fault
            certify.check_receiver(rule, int(w), t_l, tau)
        with pytest.raises(ScheduleError):
            invariants.check(rule, t_l, tau)
        with pytest.raises((ScheduleError, TopofinderError)):
            certify.certify(recipe, t_l, tau, 0, build, fault=fault)


def test_local_faults_touch_fewer_than_one_in_k_nodes():
    """Each fault of rows.LOCAL_FAULTS changes the rows into fewer than N/k receivers (the
    whole rule compared receiver by receiver with the fault-free one, at small N)."""
    cases = {"line-": _line(base("Pi(4,125)")),
             "degree-": apply("degree", (base("C(40,{1,3})"),), 2)}
    for fault in rows.LOCAL_FAULTS:
        recipe = next(r for p, r in cases.items() if fault.startswith(p))
        clean, _ = certify.construction_rule(recipe, 0, build_schedule)
        bad, _ = certify.construction_rule(recipe, 0, build_schedule, fault)
        n = clean.topology.n
        touched = sum(not np.array_equal(_canon(clean.rows_into([w])), _canon(bad.rows_into([w])))
                      for w in range(n))
        assert 0 < touched < n / certify.DEFAULT_SAMPLE, (fault, touched, n)


DIAMETER_FORMS = FORMS + [
    apply("degree", (base("UniRing(2,6)"),), 2),           # c(u) > D: the copies set D
    _line(base("UniRing(2,6)"), 2),
    apply("power", (_line(base("C(6,{1,2})")),), 2),
    apply("degree", (_line(base("C(10,{1,3})")),), 2),
]


@pytest.mark.parametrize("recipe", DIAMETER_FORMS, ids=lambda r: r.expr)
def test_diameter_laws_equal_the_measured_diameter(recipe):
    """The expansions' distance laws (line graph +1, degree expansion max(D, c), power p·D)
    from the base give the all-pairs BFS diameter of the built topology, and its check
    passes; Bi(G) has no law (None)."""
    from topofinder.finder import diameter
    from topofinder.finder.verify import build_topology
    topo = build_topology(recipe)
    value = diameter.law(recipe, 0, build_topology)
    if recipe.op == "bi":
        assert value is None
        return
    assert value.d == topo.diameter
    diameter.check(topo, value)


def test_diameter_check_refuses_a_wrong_law():
    from topofinder.finder import diameter
    from topofinder.finder.verify import build_topology
    recipe = _line(base("C(10,{1,3})"), 2)
    topo = build_topology(recipe)
    value = diameter.law(recipe, 0, build_topology)
    for wrong in (value.d - 1, value.d + 1):
        with pytest.raises(TopofinderError):
            diameter.check(topo, diameter.Law(wrong, value.c_max, False, value.witnesses))


def test_predicted_allreduce_of_a_construction_point(monkeypatch):
    """The sweep's predicted price of a point verified by construction (allreduce_price) is
    the allreduce search verifies (construction_point) and export writes: checked against the
    whole allreduce schedule, built within the true replay limit, for a topology that is not
    reverse-symmetric (its reduce-scatter from the transposes' construction)."""
    from topofinder.finder import verify
    from topofinder.finder.growth import Candidate
    from topofinder.finder.recipe import from_expression
    recipe = from_expression("L(Pi(4,256))")
    exported = verify.collective_schedule(recipe, "allreduce")
    whole = build_schedule(recipe)
    monkeypatch.setattr(verify, "REPLAY_LIMIT", 256 * 256 * 4)
    cand = Candidate(recipe=recipe, n=1024, d=4, t_l=whole.num_steps, tau=whole.tau)
    assert verify.by_construction(recipe)
    point = verify.construction_point(cand, 8, 1)
    price = verify.allreduce_price(cand)
    assert price == (point.allreduce_T_L, point.allreduce_tau)
    assert price == (exported.num_steps, exported.tau)
