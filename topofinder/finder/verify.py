"""Scoring bases and verifying frontier points (docs/algorithms.md steps 2 and 5).

``score_base`` scores one base topology exactly (BFB scorer, or a catalog entry's stored
schedule). ``build_schedule`` follows a recipe to the real topology and allgather schedule;
``verify_candidate`` builds it, replays it with the independent validator, and adds diameter,
ForestColl's T_B^FC and the all-to-all throughput. Numbers reported by `search` come from here,
never from the predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from fractions import Fraction

import numpy as np

from topofinder.compute.cache import record
from topofinder.errors import TopofinderError
from topofinder.scoring.allgather import bfb
from topofinder.scoring.allgather import bfb_bits
from topofinder.scoring.allgather import kstep
from topofinder.families import catalog
from topofinder.expansions.schedules import line_graph_schedule, power_schedule
from topofinder.families.build import parse
from topofinder.families.syntax import Leaf, parse_tree
from topofinder.finder import certify
from topofinder.finder.diameter import check as check_diameter, law as diameter_law
from topofinder.finder.operators import operator
from topofinder.finder.recipe import Recipe, apply
from topofinder.model.schedule import (
    ScheduleError, StepSchedule, allreduce, reduce_scatter, validate,
)
from topofinder.model.symmetric import (
    OrbitSchedule, check_group, line_graph_action, orbit_form, product_action, replay_by_symmetry,
    rotation, rows_schedule, inverse_element, orbit_distance_histogram, to_representatives,
    translations, transversal,
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
#: Largest number of rows a search replays by symmetry for one point (N/|Γ| sources of ~N·d
#: rows, twice when the reduce-scatter is BFB on G^T): the budget of a full replay.
#: Aff(160,101,{66,121}) x C(625,{1,22,273}) at N = 10^5 (2.6e8 rows) took 68 s CPU
SYMMETRY_REPLAY_LIMIT = REPLAY_LIMIT
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
#: Largest N²·d at which a base without a vertex-transitive symmetry is BFB-scored: its exact
#: score needs a breadth-first search from every node, O(N²·d) (Pi(8,10000): 2.5 s CPU;
#: Pi(4,100000): 195 s), and beyond REPLAY_LIMIT neither its schedule nor those of its
#: expansions (which inherit no group from it) could be replayed, so no frontier point could
#: come of it. Left out with that reason (`unscored_reason`), the search's cost grows about
#: linearly in N past 10^4.
SCORE_MAX_N2D = REPLAY_LIMIT


def unscored_reason(topo: Topology) -> str | None:
    """Why a BFB base is not scored (its exact score costs too much time or memory), None when
    it is scored."""
    if topo.vertex_transitive:
        return None
    n2d = topo.n * topo.n * topo.degree
    if topo.link_matrix.getnnz(axis=0).max() > bfb_bits.MAX_SLOTS \
            and topo.n > DENSE_SCORE_MAX_NODES:
        return (f"not scored: no vertex-transitive symmetry and more than "
                f"{bfb_bits.MAX_SLOTS} in-neighbours, so its BFB score needs an N×N matrix "
                f"(N = {topo.n} > {DENSE_SCORE_MAX_NODES})")
    if n2d > SCORE_MAX_N2D:
        return (f"not scored: no vertex-transitive symmetry, so its exact BFB score costs a "
                f"search from every node and its schedule could not be replayed "
                f"(N²·d = {n2d:.2g} > {SCORE_MAX_N2D:.2g})")
    return None


def base_topology(expr: str, source: str) -> Topology:
    """The topology of a base (a catalog entry's or a family expression's)."""
    return catalog.catalog_topology(expr) if source == "catalog" else parse(expr)


def score_base(expr: str, source: str) -> dict | None:
    """Exact (T_L, τ) and expansion flags of one base; None when it is not usable (not
    strongly connected, not regular, or too costly to score: `unscored_reason`)."""
    topo = base_topology(expr, source)
    if source == "catalog":
        entry = catalog.load_entry(expr)
        t_l, tau, lg_exact = entry["T_L"], Fraction(entry["tau"]), False
    else:
        if not topo.is_regular or unscored_reason(topo) or not topo.strongly_connected:
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
        return base_topology(recipe.base_expr, recipe.source)
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
    if recipe.method != "bfb" and _bfb_beats(named.topology, named.num_steps, named.tau):
        return bfb.bfb_schedule(named.topology)
    return named


def _bfb_beats(topo: Topology, t_l: int, tau: Fraction) -> tuple[int, Fraction] | None:
    """BFB's (T_L, τ) on ``topo`` when it is no worse than (t_l, tau) in both and better in
    one — the rule by which `export` writes BFB instead of a named construction — else None
    (also when BFB is not available here, e.g. > 16 in-links)."""
    try:
        best = bfb.bfb_score(topo)
    except TopofinderError:
        return None
    if (best.T_L, best.tau) != (t_l, tau) and best.T_L <= t_l and best.tau <= tau:
        return best.T_L, best.tau
    return None


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


#: Largest (receivers and their in-neighbours) × N distance cells an orbit BFB plan may hold
#: (int32, with the masks ~12 bytes a cell: 3.6 GB); beyond it the recipe has no orbit form.
#: Aff(160,101,{66,121}) x C(625,{1,22,273}) (160 orbits, d = 8, N = 10^5) needs 1.4e8
ORBIT_BFB_MAX_CELLS = 300_000_000


def recipe_group(recipe: Recipe, topo: Topology | None = None) -> list[tuple[int, list]]:
    """The recipe's topology as a product G_1 × … × G_k (node index in mixed radix, the last
    factor fastest): each factor's size and generators of a free abelian automorphism group
    of it ([] for the trivial group). A base has its translations (`translations`: Z_N for a
    Cayley graph of Z_N such as circulants and rings, Z_{N/c} for Aff(N, q, A) with
    c = N/gcd(N, q − 1)); a line graph has its operand's group
    lifted to the arcs (line_graph_action), a Cartesian power or product the factors' groups
    acting coordinate-wise (product_action); other operators the trivial group. A torus or
    hypercube base is a Cartesian product itself (`_coordinate_factors`). ``topo``: the
    recipe's topology when the caller has built it (its checked group is kept with it)."""
    kids = recipe.children
    if recipe.op == "base":
        topo = build_topology(recipe) if topo is None else topo
        return _coordinate_factors(recipe, topo) or [(topo.n, translations(topo))]
    if recipe.op == "product":
        return [f for c in kids for f in recipe_group(c)]
    if recipe.op in ("line", "power"):
        inner = recipe_group(kids[0])
        gens = _flat(inner)
        if recipe.op == "power":
            return [(int(np.prod([m for m, _ in inner])), gens)] * recipe.k
        try:
            return [(build_topology(recipe).n, line_graph_action(build_topology(kids[0]),
                                                                   gens))]
        except ScheduleError:
            return [(build_topology(recipe).n, [])]
    return [(build_topology(recipe).n, [])]


def _coordinate_factors(recipe: Recipe, topo: Topology) -> list[tuple[int, list]] | None:
    """Torus(m_1, …, m_k) and Hypercube(n) are Cartesian products of rings and of K_2
    (families.basic, numbered in mixed radix): Z_{m_1} × … × Z_{m_k} (Z_2^n) acts on them by
    each factor's rotation of its coordinate, freely and with one orbit, where the
    translations x ↦ x + c of Z_N leave N/m_1 orbits (N/2 for a hypercube). None for other
    bases, or when check_group does not confirm the group on ``topo``."""
    tree = parse_tree(recipe.base_expr) if recipe.source == "bfb" else None
    if not isinstance(tree, Leaf) or tree.family not in ("Torus", "Hypercube"):
        return None
    sizes = list(tree.args) if tree.family == "Torus" else [2] * tree.args[0]
    if len(sizes) < 2:
        return None
    factors = [(m, [rotation(m)]) for m in sizes]
    try:
        check_group(topo, _flat(factors))
    except ScheduleError:
        return None
    return factors


def recipe_generators(recipe: Recipe) -> list:
    """The generators of recipe_group acting on the whole topology."""
    return _flat(recipe_group(recipe))


def _flat(factors) -> list:
    """The factors' generators acting on their product (product_action)."""
    if len(factors) == 1:
        return factors[0][1]
    return product_action([m for m, _ in factors], [g for _, g in factors])


def _back(n: int, gens):
    """γ_v⁻¹(x) for the factor group of ``gens`` (as topofinder.model.symmetric's
    to_representatives wants): x − v for the rotation group of Z_n, `transversal` (O(n)
    memory, by cycles of the generators) for another group."""
    if not gens:
        return None
    if len(gens) == 1 and np.array_equal(gens[0], rotation(n)):
        return lambda v, x: _minus(x, v, n)
    return transversal(n, gens)


def _minus(x, v, n: int):
    """(x − v) mod n for 0 ≤ x, v < n (arrays or integers), without integer division: half
    the time of ``%`` on the 10^7-row sends of an N = 10^5 orbit schedule."""
    d = x - v
    return d + n * (d < 0)


def _orbit_bfb(recipe: Recipe) -> OrbitSchedule | None:
    """The BFB allgather of the recipe's topology made equivariant under its group
    (recipe_group, `orbit_bfb`); None when the group is trivial or too many orbits."""
    topo = build_topology(recipe)
    factors = recipe_group(recipe, topo)
    if not any(g for _, g in factors):
        return None
    return orbit_bfb(topo, factors)


def orbit_bfb(topo: Topology, factors) -> OrbitSchedule | None:
    """The BFB allgather of ``topo`` = G_1 × … × G_k made equivariant under the factors'
    groups ``factors`` ((size, generators) as recipe_group): the optimal in-link plans of one
    receiver per orbit (bfb.bfb_orbit_plans), their images under the group for every other
    receiver, stored as the representatives' sends (to_representatives). Each receiver's loads
    are its representative's, whose U_{r,t} is every U_{γr,t}, so τ is BFB's optimum. None
    when the plans would hold more than ORBIT_BFB_MAX_CELLS distances."""
    setup = _orbit_receivers(topo, factors)
    if setup is None:
        return None
    reps, inverse, backs = setup
    p, rows = bfb.bfb_orbit_plans(topo, reps, inverse=inverse)
    rows = to_representatives([m for m, _ in factors], backs, rows)
    return OrbitSchedule(topo, p, rows, tuple(_flat(factors)), method="bfb")


def orbit_bfb_price(topo: Topology, factors) -> tuple[int, Fraction] | None:
    """(T_L in steps, τ in M/B) of `orbit_bfb`'s schedule — BFB's optimum (001 eq. (2)) —
    from one receiver per orbit's Hall loads (bfb.bfb_orbit_score), without its flows and
    sends: O(orbits·d·N) memory, no N×N matrix. None where `orbit_bfb` is None."""
    setup = _orbit_receivers(topo, factors)
    if setup is None:
        return None
    score = bfb.bfb_orbit_score(topo, setup[0], inverse=setup[1])
    return score.T_L, score.tau


def _orbit_receivers(topo: Topology, factors):
    """(one receiver per orbit, inverse(y) = γ_y⁻¹ as a permutation, the factors' backs) of
    the factors' group acting on ``topo`` (checked: check_group), or None when the receivers'
    plans would hold more than ORBIT_BFB_MAX_CELLS distances."""
    sizes = [m for m, _ in factors]
    reps = check_group(topo, _flat(factors)).reps
    if reps.size * (topo.degree + 1) * topo.n > ORBIT_BFB_MAX_CELLS:
        return None
    backs = [_back(m, g) for m, g in factors]
    coords = np.unravel_index(np.arange(topo.n), sizes)
    return reps, (lambda y: inverse_element(sizes, backs, y, coords)), backs


def symmetric_allgather(recipe: Recipe) -> OrbitSchedule | None:
    """The recipe's allgather as one source per orbit (topofinder.model.symmetric): BFB on a
    base or product with a nontrivial group (``_orbit_bfb``); line graphs L^k (Def 1 applied
    to the representatives' sends gives exactly the sends of the shards of L(G)'s nodes v'v
    with v a representative — one per orbit of L(G)) and Cartesian powers (Def 14 restricted
    to sources whose coordinates are all representatives) of an operand with an orbit form;
    None for other recipes."""
    if recipe.op in ("base", "product"):
        return _orbit_bfb(recipe) if recipe.method == "bfb" else None
    if recipe.op not in ("line", "power"):
        return None
    child = symmetric_allgather(recipe.children[0])
    if child is None:
        return None
    g = child.topology
    reps_only = StepSchedule(g, child.shard_chunks, child.sends)
    if recipe.op == "power":
        sched = power_schedule(reps_only, recipe.k, sources=child.sources)
        gens = product_action([g.n] * recipe.k, [child.generators] * recipe.k)
        return OrbitSchedule(sched.topology, sched.shard_chunks, sched.sends, tuple(gens),
                             method=sched.method)
    try:
        gens = line_graph_action(g, child.generators)
    except ScheduleError:
        return None
    lg = line_graph_schedule(reps_only)
    keep = np.isin(lg.sends[:, 1], np.flatnonzero(np.isin(g.dst, child.sources)))
    return OrbitSchedule(lg.topology, lg.shard_chunks, lg.sends[keep], tuple(gens),
                         method="line-graph")


def symmetric_collective(recipe: Recipe, collective: str) -> OrbitSchedule | None:
    """The recipe's ``collective`` in orbit form, the schedule `collective_schedule` builds in
    full (no BFB swap: beyond REPLAY_LIMIT none is made): the allgather `symmetric_allgather`;
    its reduce-scatter (`symmetric_reduce_scatter`); the allreduce, reduce-scatter then
    allgather (Appendix B) on the representatives' rows (topofinder.model.schedule.allreduce:
    P = lcm, the allgather's steps shifted). None without an orbit form."""
    allgather = symmetric_allgather(recipe)
    if allgather is None or collective == Collective.ALLGATHER:
        return allgather
    rs = symmetric_reduce_scatter(allgather, recipe)
    if rs is None or collective == Collective.REDUCE_SCATTER:
        return rs
    return orbit_form(allreduce(rows_schedule(rs), rows_schedule(allgather)),
                      allgather.generators)


def symmetric_reduce_scatter(allgather: OrbitSchedule, recipe: Recipe) -> OrbitSchedule | None:
    """The reduce-scatter `reduce_scatter_of` writes next to ``allgather``, in orbit form
    under the same group: when G is reverse-symmetric, the allgather's representatives' rows
    reversed (Thm 2: (T+1−t, v, lo, hi, w, u), then relabelled by the known isomorphism
    G^T → G, which maps Γ-orbits onto Γ-orbits for the constructions' groups — the replay by
    symmetry checks one shard per orbit); else BFB on G^T under the recipe's group
    (`orbit_bfb`: Γ acts on G^T alike) reversed onto G (Thm 1). Each is Γ-equivariant: the
    reverse of an equivariant schedule is. None when the G^T plans are too large."""
    topo = allgather.topology
    if _reversible(topo):
        rs = reduce_scatter(rows_schedule(allgather))
    else:
        transposed = orbit_bfb(topo.transpose(), recipe_group(recipe))
        if transposed is None:
            return None
        rs = reduce_scatter(rows_schedule(transposed), topology=topo)
    return orbit_form(rs, allgather.generators)


def _orbit_form(recipe: Recipe) -> bool:
    """Whether symmetric_allgather gives the recipe an orbit form, decided from the groups
    alone (no schedule is built): BFB on a base or product with a nontrivial group within
    ORBIT_BFB_MAX_CELLS, or a line graph or power of an operand with one."""
    if recipe.op in ("base", "product"):
        if recipe.method != "bfb":
            return False
        gens = recipe_generators(recipe)
        if not gens:
            return False
        topo = build_topology(recipe)
        return check_group(topo, gens).reps.size * (topo.degree + 1) * topo.n \
            <= ORBIT_BFB_MAX_CELLS
    if recipe.op == "line":
        return _orbit_form(recipe.children[0]) and any(g for _, g in recipe_group(recipe))
    return recipe.op == "power" and _orbit_form(recipe.children[0])


@lru_cache(maxsize=64)                # asked by unverifiable_reason, then by verify_work
def _symmetry_rows(recipe: Recipe) -> tuple[int, int, bool]:
    """(orbits, rows, reversible) of the replay by symmetry of a recipe with an orbit form:
    N/|Γ| sources of ~N·d rows each, twice when the reduce-scatter is not the reversed
    allgather (BFB on G^T, replayed by symmetry too)."""
    topo = build_topology(recipe)
    orbits = check_group(topo, recipe_generators(recipe)).reps.size
    reversible = _reversible(topo)
    return orbits, orbits * topo.n * topo.degree * (1 if reversible else 2), reversible


def unverifiable_reason(candidate, construction: bool = False) -> str | None:
    """Why a predicted frontier point cannot be replayed within the budget (None: it can):
    its schedule is beyond REPLAY_LIMIT and has no orbit form (replay by symmetry), or the
    replay by symmetry would itself replay more than SYMMETRY_REPLAY_LIMIT rows — unless
    ``construction`` and it is verified by construction (exactly predicted, built by
    expansion rules above a replayable operand: topofinder.finder.certify)."""
    n2d = candidate.n * candidate.n * candidate.d
    if n2d <= REPLAY_LIMIT:
        return None
    if construction and candidate.exact and by_construction(candidate.recipe):
        return None
    if not _orbit_form(candidate.recipe):
        return (f"not verified: no orbit form (no automorphism group the replay by symmetry "
                f"knows, or more than {ORBIT_BFB_MAX_CELLS:.2g} distances to plan one "
                f"receiver per orbit), and its schedule has N²·d = {n2d:.2g} > "
                f"{REPLAY_LIMIT:.2g} rows to replay in full")
    orbits, rows, reversible = _symmetry_rows(candidate.recipe)
    if rows > SYMMETRY_REPLAY_LIMIT:
        return (f"not verified: its replay by symmetry has {orbits} orbits, "
                f"~{rows:.2g} rows (allgather{'' if reversible else ' and BFB on G^T'})"
                f" > {SYMMETRY_REPLAY_LIMIT:.2g}")
    return None


def by_construction(recipe: Recipe) -> bool:
    """Whether a point is verified by construction when that is allowed: beyond REPLAY_LIMIT,
    built by expansion rules above replayable operands (certify.constructible), and without
    an orbit form whose replay by symmetry fits SYMMETRY_REPLAY_LIMIT. `export --rank`
    generates exactly these points' schedules from the rules (topofinder.finder.per_rank)."""
    n, d = certify._size(recipe)
    if n * n * d <= REPLAY_LIMIT or not certify.constructible(recipe, certify.OPERAND_LIMIT,
                                                                   REPLAY_LIMIT):
        return False
    return not _orbit_form(recipe) or _symmetry_rows(recipe)[1] > SYMMETRY_REPLAY_LIMIT


#: The automorphism search (bliss) that ForestColl's and the all-to-all's orbit reductions
#: start with, in replayed rows per arc: measured at N = 10^5, d = 4, 9 s for 4e5 arcs
#: against 0.6 µs per replayed row.
AUTOMORPHISM_ROWS_PER_ARC = 35


def verify_work(candidate, construction: tuple[int, int] | None = None) -> int:
    """The work of `verify_candidate` in replayed rows, for a progress bar's ETA: N²·d in full
    within REPLAY_LIMIT, else the replay by symmetry's (`_symmetry_rows`), plus the
    automorphism search (AUTOMORPHISM_ROWS_PER_ARC per arc); by construction, the sampled
    receivers' and their senders' rows, ~sample·(d + 1)·N·d. Only for candidates that
    `unverifiable_reason` passes."""
    n, d = candidate.n, candidate.d
    if construction and by_construction(candidate.recipe):
        return construction[0] * (d + 1) * n * d
    rows = n * n * d if n * n * d <= REPLAY_LIMIT else _symmetry_rows(candidate.recipe)[1]
    return rows + AUTOMORPHISM_ROWS_PER_ARC * n * d


@record
@dataclass(frozen=True)
class VerifiedPoint:
    """The verified numbers of one frontier point (docs/formats.md, `search` frontier fields):
    T_L in steps, τ in M/B (exact). ``verified``: T_L and τ come from the built and replayed
    schedule (False beyond REPLAY_LIMIT without a symmetry: the exact predicted values);
    ``verified_by``: "full", "symmetry" (topofinder.model.symmetric) or "construction"
    (topofinder.finder.certify; ``certificate`` then holds its sample, seed, invariants and
    detection statement, the diameter comes from the expansions' distance laws
    (topofinder.finder.diameter), and τ_FC and the all-to-all are None), None when not
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
    diameter: int | None
    bidirectional: bool
    moore_T_L: int
    tau_fc: Fraction | None
    alltoall_f: float | None
    alltoall_f_upper: float | None
    alltoall_bound: float | None
    alltoall_method: str
    alltoall_gap: float | None
    certificate: dict | None = None


def verify_candidate(candidate, full_alltoall: bool = False,
                     construction: tuple[int, int] | None = None) -> VerifiedPoint:
    """Build, replay and score one candidate: the verified numbers of a frontier point. The
    allgather is replayed by symmetry when the recipe has an orbit form that is the schedule
    `export` writes (``_symmetric_point``), else in full up to REPLAY_LIMIT; beyond it the
    schedule is not materialised and T_L, τ stay the exact predicted ones.
    All-to-all: cheap (exact when the symmetry-reduced LP is small, else a certified upper
    bound only) unless ``full_alltoall``. ``construction`` = (sample, seed): beyond the limit
    without an orbit form, a point built by expansion rules is verified by construction
    (`construction_point`)."""
    if construction and by_construction(candidate.recipe):
        return construction_point(candidate, *construction)
    point = _symmetric_point(candidate)
    if point is not None:
        topo, t_l, tau, verified_by, method, rs_t_l, rs_tau = point
    elif candidate.n * candidate.n * candidate.d > REPLAY_LIMIT:
        topo, t_l, tau, verified_by = (build_topology(candidate.recipe), candidate.t_l,
                                       candidate.tau, None)
        method = candidate.recipe.method
        rs_t_l, rs_tau = _reduce_scatter_price(topo, t_l, tau, candidate.recipe)
    else:
        schedule = allgather_schedule(candidate.recipe)
        validate(schedule)
        topo, t_l, tau, verified_by = schedule.topology, schedule.num_steps, schedule.tau, "full"
        method = schedule.method
        if candidate.recipe.method.removesuffix("+kstep") == method:
            method = candidate.recipe.method    # the named construction: say if k-step is inside
        rs_t_l, rs_tau = _verified_reduce_scatter(topo, t_l, tau)
    # the replayed allgather is a tree-flow schedule: on homogeneous links its load per unit
    # capacity, τ·N/d in shards, bounds ForestColl's ratio from above (and ends its search
    # when it meets a cut: a BW-optimal point needs no max-flow)
    achieved = None if topo.heterogeneous else Fraction(tau) * topo.n / topo.degree
    fc = throughput_optimum(topo, achieved=achieved)
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


#: how a construction's diameter is known (the certificate's ``diameter.by``)
DIAMETER_BY = ("the expansions' distance laws (L(G): D + 1; G*n: max(D, longest shortest "
               "cycle); G^p: p*D) from the operand measured whole, checked by BFS from "
               "witnesses and sampled nodes")


def construction_point(candidate, sample: int, seed: int) -> VerifiedPoint:
    """The verified numbers of a point verified by construction (topofinder.finder.certify):
    the allgather's (T_L, τ) from the theorems over the replayed operands, checked against
    the prediction and by a sampled exact replay of ``sample`` receivers (``seed``); the
    reduce-scatter the allgather reversed (Thm 2) when G is reverse-symmetric, else the same
    construction on the operands' transposes (BFB on G_0^T; (L(G))^T ≅ L(G^T), (G*n)^T =
    G^T*n, (G^p)^T = (G^T)^p, up to the relabelling per_rank.transposed_map, which keeps
    T_L and τ) reversed (Thm 1), certified alike. The diameter follows the expansions'
    distance laws from the measured operand, checked by BFS on the built topology
    (topofinder.finder.diameter; None where no law applies). ForestColl's τ_FC and the
    all-to-all need the whole graph's cuts or flows, which no theorem carries through the
    expansions: not computed (None) at this size (docs/algorithms.md)."""
    recipe = candidate.recipe
    topo = build_topology(recipe)
    cert = certify.certify(recipe, candidate.t_l, candidate.tau, certify.OPERAND_LIMIT,
                           build_schedule, sample, seed)
    if _reversible(topo):
        rs_t_l, rs_tau = candidate.t_l, Fraction(candidate.tau)
    else:
        rs = certify.certify(recipe, None, None, certify.OPERAND_LIMIT, transposed_schedule,
                             sample, seed)
        cert["reduce_scatter"] = {k: rs[k] for k in ("T_L", "tau", "rows_checked", "bases")}
        rs_t_l, rs_tau = rs["T_L"], Fraction(rs["tau"])
    t_l, tau = candidate.t_l, Fraction(candidate.tau)
    value = diameter_law(recipe, certify.OPERAND_LIMIT, build_topology)
    if value is not None:
        sources = check_diameter(topo, value, seed)
        cert["diameter"] = {"value": value.d, "by": DIAMETER_BY, "bfs_sources": len(sources)}
    return VerifiedPoint(
        expr=candidate.expr, T_L=t_l, tau=tau, verified=True, verified_by="construction",
        allreduce_T_L=rs_t_l + t_l, allreduce_tau=rs_tau + tau, schedule=recipe.method,
        diameter=None if value is None else value.d, bidirectional=bool(topo.bidirectional),
        moore_T_L=moore_bound_steps(topo.n, topo.degree), tau_fc=None, alltoall_f=None,
        alltoall_f_upper=None, alltoall_bound=None, alltoall_method="not computed",
        alltoall_gap=None, certificate=cert)


def transposed_schedule(recipe: Recipe) -> StepSchedule:
    """The allgather of a construction's operand on its transpose: BFB on G^T (Thm 1's
    reduce-scatter of a topology that is not reverse-symmetric, before reversal)."""
    return bfb.bfb_schedule(build_topology(recipe).transpose())


#: recipe ↦ (allgather, reduce-scatter or None) orbit schedules the last verification in this
#: process replayed (within REPLAY_LIMIT), for pricing the point next in the same task
#: (workload.async_price) instead of building them again; given up when taken.
_REPLAYED: dict = {}


def replayed_orbits(recipe: Recipe):
    """`_REPLAYED`'s schedules when they are ``recipe``'s (then no longer held), else None."""
    return _REPLAYED.pop(recipe, None)


def _remember(recipe: Recipe, allgather, reduce_scatter) -> None:
    _REPLAYED.clear()
    if allgather.topology.n ** 2 * allgather.topology.degree <= REPLAY_LIMIT:
        _REPLAYED[recipe] = (allgather, reduce_scatter)


def _symmetric_point(candidate):
    """(topology, T_L, τ, "symmetry", method, reduce-scatter T_L, τ) of a candidate whose
    allgather is replayed by symmetry (symmetric_allgather), None when it has no orbit form.
    Within REPLAY_LIMIT, where `export` writes BFB instead of the named construction
    (allgather_schedule: BFB no worse in T_L and τ and better in one), that BFB schedule made
    equivariant under the same group is replayed (method "bfb"). The reduce-scatter is the
    allgather reversed when G is reverse-symmetric (Thm 2), else BFB on G^T reversed (Thm 1):
    G's group acts on G^T alike, so that BFB is replayed by symmetry too."""
    orbit = symmetric_allgather(candidate.recipe)
    if orbit is None:
        return None
    topo, method = orbit.topology, candidate.recipe.method
    within = candidate.n * candidate.n * candidate.d <= REPLAY_LIMIT
    if within and method != "bfb" and _bfb_beats(topo, orbit.num_steps, orbit.tau):
        # export writes BFB on the whole topology (allgather_schedule): the same group
        # replays it, its plans made equivariant (orbit_bfb: BFB's optimal T_L and τ)
        orbit, method = orbit_bfb(topo, recipe_group(candidate.recipe)), "bfb"
        if orbit is None:
            return None
    t_l, tau = orbit.num_steps, orbit.tau
    replay_by_symmetry(orbit)
    if "distance_histogram" not in topo.__dict__:     # diameter and all-to-all bound, by orbits
        hist = orbit_distance_histogram(topo, orbit.action)
        hist.setflags(write=False)
        topo.__dict__["distance_histogram"] = hist
    transposed = None
    if _reversible(topo):
        rs = t_l, tau
    else:
        transposed = symmetric_reduce_scatter(orbit, candidate.recipe)
        if transposed is None:
            return None
        replay_by_symmetry(transposed)
        rs = transposed.num_steps, transposed.tau
    _remember(candidate.recipe, orbit, transposed)
    return topo, t_l, tau, "symmetry", method, *rs


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
    on G^T (Thm 1), which may cost more. Beyond REPLAY_LIMIT as `verify_candidate` prices a
    point there (`_symmetric_point`; no schedule swapped): the exact predicted allgather, or
    its orbit form's when the prediction is a bound, and BFB on G^T under the recipe's group
    (`_reduce_scatter_price`); TopofinderError for a point without an orbit form, which search
    and the sweep leave out (`unverifiable_reason`). A point verified by construction
    (`by_construction`): its allgather's exact (T_L, τ) and, when G is not reverse-symmetric,
    the reduce-scatter the theorems give over the operands' transposes, as
    `construction_point` prices it (no receiver sampled here)."""
    if candidate.n * candidate.n * candidate.d > REPLAY_LIMIT and candidate.exact and \
            by_construction(candidate.recipe):
        t_l, tau = candidate.t_l, Fraction(candidate.tau)
        if _reversible(build_topology(candidate.recipe)):
            return 2 * t_l, 2 * tau
        rs = certify.certify(candidate.recipe, None, None, certify.OPERAND_LIMIT,
                             transposed_schedule, sample=0)
        return rs["T_L"] + t_l, Fraction(rs["tau"]) + tau
    if candidate.n * candidate.n * candidate.d > REPLAY_LIMIT:
        topo = build_topology(candidate.recipe)
        t_l, tau = candidate.t_l, candidate.tau
        if not candidate.exact:
            orbit = symmetric_allgather(candidate.recipe)
            if orbit is None:
                raise TopofinderError(f"{candidate.expr}: no orbit form to price beyond the "
                                      f"replay limit")
            t_l, tau = orbit.num_steps, orbit.tau
    elif candidate.exact:
        topo = build_topology(candidate.recipe)
        t_l, tau = _exported_allgather_price(candidate, topo)
    else:
        topo, t_l, tau = _allgather_price(candidate.recipe)
    rs_t_l, rs_tau = _reduce_scatter_price(topo, t_l, tau, candidate.recipe)
    return rs_t_l + t_l, rs_tau + tau


def _allgather_price(recipe: Recipe) -> tuple[Topology, int, Fraction]:
    """(topology, T_L, τ) of `allgather_schedule`, the named construction built but the BFB
    schedule it falls back to or swaps in only scored (BFB's score is that schedule's (T_L,
    τ); at N = 1024 the schedule costs ten times the score)."""
    try:
        named = build_schedule(recipe)
    except TopofinderError:
        topo = build_topology(recipe)
        best = bfb.bfb_score(topo)
        return topo, best.T_L, best.tau
    beats = _bfb_beats(named.topology, named.num_steps, named.tau) \
        if recipe.method != "bfb" else None
    return (named.topology, *(beats or (named.num_steps, named.tau)))


def _exported_allgather_price(candidate, topo: Topology) -> tuple[int, Fraction]:
    """(T_L, τ) of `allgather_schedule` for an exactly predicted candidate without building
    it: the construction's proven (T_L, τ) — its operators only apply where their theorem
    holds — unless BFB on the built topology is no worse in both and better in one."""
    named = candidate.t_l, candidate.tau
    if candidate.recipe.method == "bfb":
        return named
    return _bfb_beats(topo, *named) or named


def _reduce_scatter_price(topo: Topology, t_l: int, tau: Fraction,
                          recipe: Recipe) -> tuple[int, Fraction]:
    """(T_L, τ) of the reduce-scatter exported next to an allgather of (t_l, tau) on topo,
    without building it: equal when topo is reverse-symmetric (Thm 2), else BFB on G^T
    (Thm 1) — scored in full up to REPLAY_LIMIT, beyond it from one receiver per orbit of the
    recipe's group acting on G^T (`orbit_bfb_price`; G's automorphisms are G^T's), as
    `_symmetric_point` replays it. TopofinderError beyond the limit without such a group."""
    if _reversible(topo):
        return t_l, tau
    if topo.n * topo.n * topo.degree <= REPLAY_LIMIT:
        rs = bfb.bfb_score(topo.transpose())
        return rs.T_L, rs.tau
    factors = recipe_group(recipe)
    price = orbit_bfb_price(topo.transpose(), factors) if any(g for _, g in factors) else None
    if price is None:
        raise TopofinderError(f"{recipe.expr}: its reduce-scatter (BFB on G^T) has no orbit "
                              f"form to price beyond the replay limit (N²·d = "
                              f"{topo.n * topo.n * topo.degree:.2g} > {REPLAY_LIMIT:.2g})")
    return price


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
