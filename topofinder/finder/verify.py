"""Scoring bases and verifying frontier points (docs/algorithms.md steps 2 and 5).

``score_base`` scores one base topology exactly (BFB scorer, or a catalog entry's stored
schedule). ``build_schedule`` follows a recipe to the real topology and allgather schedule;
``verify_candidate`` builds it, replays it with the independent validator, and adds diameter,
ForestColl's T_B^FC and the all-to-all throughput. Numbers reported by `search` come from here,
never from the predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from topofinder.compute.cache import record
from topofinder.errors import TopofinderError
from topofinder.scoring.allgather import bfb
from topofinder.scoring.allgather import bfb_bits
from topofinder.scoring.allgather import kstep
from topofinder.families import catalog
from topofinder.expansions.schedules import line_graph_schedule
from topofinder.families.build import parse
from topofinder.finder.operators import operator
from topofinder.finder.recipe import Recipe, apply
from topofinder.model.schedule import (
    ScheduleError, StepSchedule, allreduce, reduce_scatter, validate,
)
from topofinder.model.symmetric import (
    OrbitSchedule, check_group, line_graph_action, replay_by_symmetry, rotation,
)
from topofinder.model.bounds import check_claim, moore_bound_steps
from topofinder.model.topology import Topology
from topofinder.scoring.alltoall.concurrent_flow import alltoall_summary
from topofinder.scoring.trees.forestcoll import throughput_optimum
from topofinder.model.units import exact
from topofinder.model.collectives import Collective

#: all-to-all in `search`: by default the exact symmetry-reduced LP when it has at most this
#: many variables, else only the certified hop-count upper bound (f reported as None); when the
#: workload ranks by all-to-all, a certified bracket of gap ALLTOALL_GAP (below)
ALLTOALL_MAX_VARIABLES = 10_000

#: Largest N²·d whose schedule is built and replayed: a replayed allgather has up to ~N²·d
#: sends (48 bytes each, several times that while replaying), so N = 4096, d = 16 (2.7e8)
#: does not fit in 24 GiB; N = 4096, d = 4 (6.7e7) does. Beyond it a frontier point keeps its
#: exact scored or theorem value and is marked unverified.
REPLAY_LIMIT = 4096 * 4096 * 8
#: all-to-all when the workload ranks by it: a certified bracket of at most this relative gap
ALLTOALL_GAP = 0.01


def _simple(topo: Topology) -> bool:
    """No self-loops and no parallel arcs."""
    return topo.self_loops == 0 and topo.link_matrix.nnz == topo.num_arcs


def _reverse_symmetric(topo: Topology) -> bool:
    """Reverse symmetry when it is known or cheap to decide (small graphs); else False."""
    if topo.bidirectional or topo.reverse_isomorphism is not None:
        return topo.bidirectional or topo.is_reverse_symmetric()
    return topo.n <= 32 and topo.is_reverse_symmetric()


#: Largest N at which a base that is neither vertex-transitive nor within the streamed BFB
#: scorer's in-neighbour limit (bfb_bits.MAX_SLOTS) is scored: the scorer then holds an N×N
#: distance matrix, 40 GB at N = 10^5 (Pi(8,100000) took the machine's 24 GiB and was killed)
DENSE_SCORE_MAX_NODES = 16_384


def score_base(expr: str, source: str) -> dict | None:
    """Exact (T_L, τ) and expansion flags of one base; None when it is not usable (not
    strongly connected, not regular, or beyond DENSE_SCORE_MAX_NODES without a streamed
    scorer)."""
    if source == "catalog":
        entry = catalog.load_entry(expr)
        topo = catalog.catalog_topology(expr)
        t_l, tau, lg_exact = entry["T_L"], Fraction(entry["tau"]), False
    else:
        topo = parse(expr)
        if not topo.is_regular or not topo.strongly_connected:
            return None
        dense = not topo.vertex_transitive and \
            topo.link_matrix.getnnz(axis=0).max() > bfb_bits.MAX_SLOTS
        if dense and topo.n > DENSE_SCORE_MAX_NODES:
            return None
        score = bfb.bfb_score(topo)
        t_l, tau = score.T_L, score.tau
        out_neighbours = topo.link_matrix.getnnz(axis=1)
        lg_exact = bool(out_neighbours.min() > 1)
    simple = _simple(topo)
    return {"expr": expr, "source": source, "N": topo.n, "d": topo.degree, "T_L": int(t_l),
            "tau": exact(tau), "bidirectional": bool(topo.bidirectional),
            "reverse_symmetric": _reverse_symmetric(topo),
            "bfb_bw_optimal": source == "bfb" and simple and tau == Fraction(topo.n - 1, topo.n),
            "lg_exact": lg_exact, "loop_free": topo.self_loops == 0}


def build_topology(recipe: Recipe) -> Topology:
    """The topology the recipe names, by the topology expansions alone (no schedule is built;
    the same node numbering as `build_schedule`'s topology)."""
    if recipe.op == "base":
        return (catalog.catalog_topology(recipe.base_expr) if recipe.source == "catalog"
                else parse(recipe.base_expr))
    return operator(recipe.op).topology([build_topology(c) for c in recipe.children], recipe.k)


def build_schedule(recipe: Recipe) -> StepSchedule:
    """The allgather schedule the recipe names (Defs 1, 2, 14, Thm 13, App. A.6), by the
    registered operators (topofinder.finder.operators)."""
    if recipe.op == "base":
        if recipe.source == "catalog":
            return catalog.catalog_schedule(recipe.base_expr)
        return bfb.bfb_schedule(parse(recipe.base_expr))
    return operator(recipe.op).schedule(
        lambda: [build_schedule(c) for c in recipe.children],
        lambda: build_topology(recipe), recipe.k)


def allgather_schedule(recipe: Recipe) -> StepSchedule:
    """The allgather `export` writes and `search` prices for a recipe: the construction it
    names, unless that construction does not apply to the built topology (e.g. a degree
    expansion of a base with self-loops, Thm 11) or the optimal BFB schedule of the same
    topology is no worse in T_L and τ and better in one (e.g. Bi(UniRing(1,5)): the App. A.6
    construction keeps the ring's 4 steps, BFB needs 2) — then that BFB schedule."""
    try:
        named = build_schedule(recipe)
    except TopofinderError:
        return bfb.bfb_schedule(build_topology(recipe))
    if recipe.method == "bfb":
        return named
    try:
        best = bfb.bfb_score(named.topology)
    except TopofinderError:                      # BFB not available here (e.g. > 16 in-links)
        return named
    if (best.T_L, best.tau) != (named.num_steps, named.tau) and best.T_L <= named.num_steps \
            and best.tau <= named.tau:
        return bfb.bfb_schedule(named.topology)
    return named


#: k-step schedules are tried on topologies whose automorphism group leaves at most this many
#: vertex orbits (LP sources): column generation costs grow with sources × N × k
KSTEP_MAX_SOURCES = 16


def score_kstep(recipe: Recipe, extra_steps: int) -> dict | None:
    """The routed schedule of the recipe's topology with k = diameter + ``extra_steps`` steps
    (topofinder.scoring.allgather.kstep), built and replayed: its exact (T_L, τ); None when the
    topology has more than KSTEP_MAX_SOURCES vertex orbits."""
    topo = build_topology(recipe)
    if kstep.symmetry(topo).reps.size > KSTEP_MAX_SOURCES:
        return None
    steps = topo.diameter + extra_steps
    schedule = build_schedule(apply("kstep", (recipe,), steps))
    validate(schedule)
    return {"T_L": schedule.num_steps, "tau": exact(schedule.tau), "N": topo.n,
            "d": topo.degree, "bidirectional": bool(topo.bidirectional),
            "loop_free": topo.self_loops == 0}


def _orbit_bfb(topo: Topology) -> OrbitSchedule | None:
    """The BFB allgather of a Cayley graph of Z_N (rotation x ↦ x+1 an automorphism) made
    equivariant: receiver 0's optimal in-link plan (bfb.bfb_receiver_sends, O(N·d) memory at
    any N) translated to every receiver, as node 0's sends (a row (t, v, lo, hi, u, 0)
    becomes (t, 0, lo, hi, u−v, −v)). Each receiver's loads are receiver 0's, so τ is BFB's
    optimum (vertex-transitive: U_t = U_{0,t}). None when the rotation is not a free
    automorphism (checked) or BFB does not apply (more than bfb.MAX_SUBSET_BITS
    in-neighbours)."""
    n = topo.n
    try:
        check_group(topo, [rotation(n)])
        p, s = bfb.bfb_receiver_sends(topo, 0)
    except TopofinderError:
        return None
    rows = np.stack([s[:, 0], np.zeros_like(s[:, 0]), s[:, 2], s[:, 3], (s[:, 4] - s[:, 1]) % n,
                     (-s[:, 1]) % n], axis=1)
    return OrbitSchedule(topo, p, rows, (rotation(n),), method="bfb")


def symmetric_allgather(recipe: Recipe) -> OrbitSchedule | None:
    """The recipe's allgather as one source per orbit (topofinder.model.symmetric), for line
    graphs L^k of a BFB-scheduled Cayley graph of Z_N (the rotation acts freely on every
    line graph's nodes, G's arcs: line_graph_action); None for other recipes. Line graph of
    an orbit schedule: Def 1 applied to the representatives' sends gives exactly the sends of
    the shards of L(G)'s nodes v'v with v a representative — one per orbit of L(G)."""
    if recipe.op == "base":
        return _orbit_bfb(parse(recipe.base_expr)) if recipe.source == "bfb" else None
    if recipe.op != "line":
        return None
    child = symmetric_allgather(recipe.children[0])
    if child is None:
        return None
    g = child.topology
    try:
        gens = line_graph_action(g, child.generators)
    except ScheduleError:
        return None
    lg = line_graph_schedule(StepSchedule(g, child.shard_chunks, child.sends))
    keep = np.isin(lg.sends[:, 1], np.flatnonzero(np.isin(g.dst, child.sources)))
    return OrbitSchedule(lg.topology, lg.shard_chunks, lg.sends[keep], tuple(gens),
                         method="line-graph")


@record
@dataclass(frozen=True)
class VerifiedPoint:
    """The verified numbers of one frontier point (docs/formats.md, `search` frontier fields):
    T_L in steps, τ in M/B (exact). ``verified``: T_L and τ come from the built and replayed
    schedule (False beyond REPLAY_LIMIT without a symmetry: the exact predicted values);
    ``verified_by``: "full" or "symmetry" (topofinder.model.symmetric), None when not
    replayed. ``allreduce_*``: the
    reduce-scatter `export` writes, then the allgather (Thm 1, 2). ``schedule``: the method
    of the allgather. ``tau_fc``: ForestColl's T_B^FC (002 Thm 1). ``alltoall_*``: the
    concurrent flow f (link capacity 1), its certified upper bound and method (001 App. A.5)."""

    expr: str
    T_L: int
    tau: Fraction
    verified: bool
    verified_by: str | None
    allreduce_T_L: int
    allreduce_tau: Fraction
    schedule: str
    diameter: int
    bidirectional: bool
    moore_T_L: int
    tau_fc: Fraction
    alltoall_f: float | None
    alltoall_f_upper: float | None
    alltoall_bound: float | None
    alltoall_method: str
    alltoall_gap: float | None


def verify_candidate(candidate, full_alltoall: bool = False) -> VerifiedPoint:
    """Build, replay and score one candidate: the verified numbers of a frontier point. The
    allgather is replayed by symmetry when the recipe has an orbit form that is the schedule
    `export` writes (``_symmetric_point``), else in full up to REPLAY_LIMIT; beyond it the
    schedule is not materialised and T_L, τ stay the exact predicted ones.
    All-to-all: cheap (exact when the symmetry-reduced LP is small, else a certified upper
    bound only) unless ``full_alltoall``."""
    point = _symmetric_point(candidate)
    if point is not None:
        topo, t_l, tau, verified_by, method, rs_t_l, rs_tau = point
    elif candidate.n * candidate.n * candidate.d > REPLAY_LIMIT:
        topo, t_l, tau, verified_by = (build_topology(candidate.recipe), candidate.t_l,
                                       candidate.tau, None)
        method = candidate.recipe.method
        rs_t_l, rs_tau = _reduce_scatter_price(topo, t_l, tau)
    else:
        schedule = allgather_schedule(candidate.recipe)
        validate(schedule)
        topo, t_l, tau, verified_by = schedule.topology, schedule.num_steps, schedule.tau, "full"
        method = schedule.method
        if candidate.recipe.method.removesuffix("+kstep") == method:
            method = candidate.recipe.method    # the named construction: say if k-step is inside
        rs_t_l, rs_tau = _verified_reduce_scatter(topo, t_l, tau)
    fc = throughput_optimum(topo)
    if full_alltoall:
        a2a = alltoall_summary(topo, mode="bracket", gap=ALLTOALL_GAP)
    else:
        a2a = alltoall_summary(topo, max_variables=ALLTOALL_MAX_VARIABLES)
    return VerifiedPoint(
        expr=candidate.expr, T_L=t_l, tau=Fraction(tau), verified=verified_by is not None,
        verified_by=verified_by,
        allreduce_T_L=rs_t_l + t_l, allreduce_tau=Fraction(rs_tau + tau), schedule=method,
        diameter=topo.diameter, bidirectional=bool(topo.bidirectional),
        moore_T_L=moore_bound_steps(topo.n, topo.degree), tau_fc=Fraction(fc.tau),
        alltoall_f=a2a["alltoall_f"], alltoall_f_upper=a2a["alltoall_f_upper"],
        alltoall_bound=a2a["alltoall_bound"], alltoall_method=a2a["alltoall_method"],
        alltoall_gap=a2a["alltoall_gap"])


def _symmetric_point(candidate):
    """(topology, T_L, τ, "symmetry", method, reduce-scatter T_L, τ) of a candidate whose
    allgather is replayed by symmetry (symmetric_allgather), None when it has no orbit form or
    — within REPLAY_LIMIT — `export` would write another schedule (allgather_schedule swaps in
    BFB when BFB is no worse in T_L and τ and better in one). The reduce-scatter is the
    allgather reversed when G is reverse-symmetric (Thm 2), else BFB on G^T, replayed in full
    within REPLAY_LIMIT and priced exactly beyond it."""
    orbit = symmetric_allgather(candidate.recipe)
    if orbit is None:
        return None
    topo, t_l, tau = orbit.topology, orbit.num_steps, orbit.tau
    within = candidate.n * candidate.n * candidate.d <= REPLAY_LIMIT
    if within and candidate.recipe.method != "bfb":
        try:
            best = bfb.bfb_score(topo)
        except TopofinderError:
            best = None
        if best is not None and (best.T_L, best.tau) != (t_l, tau) and best.T_L <= t_l \
                and best.tau <= tau:
            return None
    replay_by_symmetry(orbit)
    rs = (_verified_reduce_scatter if within else _reduce_scatter_price)(topo, t_l, tau)
    return topo, t_l, tau, "symmetry", candidate.recipe.method, *rs


def _verified_reduce_scatter(topo: Topology, t_l: int, tau: Fraction) -> tuple[int, Fraction]:
    """(T_L, τ) of the reduce-scatter exported next to an allgather of (t_l, tau) on topo:
    equal when topo is reverse-symmetric (Thm 2), else the BFB schedule of G^T reversed,
    built and replayed (Thm 1)."""
    if _reversible(topo):
        return t_l, tau
    rs = bfb.bfb_schedule(topo, collective=Collective.REDUCE_SCATTER)
    validate(rs)
    return rs.num_steps, rs.tau


def _reversible(g: Topology) -> bool:
    """The allgather reversed is a reduce-scatter on G itself (Thm 2): G is bidirectional or
    has a known isomorphism G^T → G."""
    return bool(g.bidirectional) or g.reverse_isomorphism is not None


def reduce_scatter_of(allgather: StepSchedule) -> StepSchedule:
    """The reduce-scatter `export` writes next to this allgather: the allgather reversed by
    Thm 2 when G is reverse-symmetric with a known isomorphism (same T_L and τ), else the
    optimal BFB schedule of G^T reversed (Thm 1), which may cost more."""
    if _reversible(allgather.topology):
        return reduce_scatter(allgather)
    return bfb.bfb_schedule(allgather.topology, collective=Collective.REDUCE_SCATTER)


def allreduce_price(candidate) -> tuple[int, Fraction]:
    """(T_L in steps, τ in M/B) of a predicted frontier point's allreduce exactly as `export`
    writes it and `search` prices it: the exported allgather (`allgather_schedule`; built and
    scored unless the point is an exactly scored BFB schedule) plus the exported
    reduce-scatter — that allgather reversed when G is reverse-symmetric (Thm 2), else BFB
    on G^T (Thm 1), which may cost more."""
    if candidate.exact:
        topo = build_topology(candidate.recipe)
        t_l, tau = _exported_allgather_price(candidate, topo)
    else:
        allgather = allgather_schedule(candidate.recipe)
        topo, t_l, tau = allgather.topology, allgather.num_steps, allgather.tau
    rs_t_l, rs_tau = _reduce_scatter_price(topo, t_l, tau)
    return rs_t_l + t_l, rs_tau + tau


def _exported_allgather_price(candidate, topo: Topology) -> tuple[int, Fraction]:
    """(T_L, τ) of `allgather_schedule` for an exactly predicted candidate without building
    it: the construction's proven (T_L, τ) — its operators only apply where their theorem
    holds — unless BFB on the built topology is no worse in both and better in one."""
    named = candidate.t_l, candidate.tau
    if candidate.recipe.method == "bfb":
        return named
    try:
        best = bfb.bfb_score(topo)
    except TopofinderError:
        return named
    if (best.T_L, best.tau) != named and best.T_L <= named[0] and best.tau <= named[1]:
        return best.T_L, best.tau
    return named


def _reduce_scatter_price(topo: Topology, t_l: int, tau: Fraction) -> tuple[int, Fraction]:
    """(T_L, τ) of the reduce-scatter exported next to an allgather of (t_l, tau) on topo,
    without building it: equal when topo is reverse-symmetric, else BFB scored on G^T."""
    if _reversible(topo):
        return t_l, tau
    rs = bfb.bfb_score(topo.transpose())
    return rs.T_L, rs.tau


def collective_schedule(recipe: Recipe, collective: str = Collective.ALLGATHER) -> StepSchedule:
    """The recipe's schedule for ``collective``: the allgather itself; the reduce-scatter of
    :func:`reduce_scatter_of`; the allreduce as reduce-scatter then allgather (Appendix B)."""
    allgather = allgather_schedule(recipe)
    if collective == Collective.ALLGATHER:
        return allgather
    rs = reduce_scatter_of(allgather)
    return rs if collective == Collective.REDUCE_SCATTER else allreduce(rs, allgather)


def check_score(args: tuple, score: dict | None) -> None:
    """A cached base or k-step score (`score_base`, `score_kstep`) that can be true: its
    (T_L, τ) within the bounds of its own N and d (ValueError otherwise)."""
    if score is not None:
        check_claim(score["N"], score["d"], score["T_L"], score["tau"], f"score of {args[0]}")


def check_verified(args: tuple, verified: VerifiedPoint) -> None:
    """A cached `verify_candidate` result that can be true for the candidate ``args[0]``: the
    expression is the candidate's and allgather, allreduce (two passes) and diameter respect
    the Moore, hop and (N−1)/N bounds (ValueError otherwise)."""
    c = args[0]
    if verified.expr != c.expr:
        raise ValueError(f"verification of {verified.expr} stored for {c.expr}")
    check_claim(c.n, c.d, verified.T_L, verified.tau, c.expr, verified.diameter)
    check_claim(c.n, c.d, -(-verified.allreduce_T_L // 2), Fraction(verified.allreduce_tau) / 2,
                f"allreduce of {c.expr}")
