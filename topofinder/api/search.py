"""Search: the verified Pareto frontier for (N, d), ranked for a workload, as a
:class:`SearchResult` (the `topofinder search --json` document, records for pandas, a plot).

>>> r = search(16, 2, jobs=1)
>>> [(p.expr, p.T_L, p.tau_exact) for p in r.frontier]
[('L(Aff(8,3,{1,3}))', 4, '15/16')]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal

from topofinder.compute.lazy import lazy_module
from topofinder.errors import TopofinderError
from topofinder.export.plot import plot_frontier
from topofinder.finder.certify import DEFAULT_SAMPLE, DEFAULT_SEED
from topofinder.families.build import load_topology
from topofinder.workload.cost import Workload
from topofinder.workload.hierarchy import check_gpus, hierarchical_score, parse_intra
from topofinder.workload.moe import MoEWorkload, load_moe
from topofinder.workload.rank import FrontierPoint, Hierarchy, SearchResult
from topofinder.workload.rank import search as _search

#: What `--robust`, `--phases` and `--from` run (with the cabling they read), loaded when one
#: is given: most searches give none.
_robust = lazy_module("topofinder.resilience.robust")
_phases = lazy_module("topofinder.resilience.phases")
_moves = lazy_module("topofinder.resilience.moves")

#: The servers' internal fabric when none is named (``search(gpus_per_node=...)``).
DEFAULT_INTRA = "NVSwitch 300GB/s"


def network_workload(workload: Workload | None, moe: MoEWorkload | None) -> Workload:
    """``workload`` (default: the command line's, ``Workload.from_strings()``: α = 10us,
    B = 100Gbps, M = 1MB) with the α and bandwidth of the MoE file's ``[network]`` table when
    it has one (they win over the options)."""
    workload = workload or Workload.from_strings()
    if moe is None or (moe.alpha_s is None and moe.bandwidth_Bps is None):
        return workload
    return replace(workload,
                   alpha_s=workload.alpha_s if moe.alpha_s is None else moe.alpha_s,
                   bandwidth_Bps=(workload.bandwidth_Bps if moe.bandwidth_Bps is None
                                  else moe.bandwidth_Bps),
                   labels={"size": workload.labels.get("size", "")})


def _bandwidth_text(workload: Workload) -> str:
    """The node bandwidth as the hierarchy composer reads it: the label given, else MB/s."""
    label = workload.labels.get("bandwidth")
    return label if label else f"{Decimal(workload.bandwidth_Bps) / Decimal(10 ** 6):f}MB/s"


def hierarchy(frontier: tuple[FrontierPoint, ...], gpus_per_node: int, intra: str,
              workload: Workload) -> Hierarchy:
    """ForestColl on each frontier topology composed with the servers' internal fabric; the
    best point has the highest GPU algbw (ties: the faster allreduce)."""
    parse_intra(intra)
    server_bandwidth = _bandwidth_text(workload)
    scores = tuple(hierarchical_score(load_topology(p.expr), gpus_per_node, intra,
                                      server_bandwidth) for p in frontier)
    best = max(range(len(frontier)), key=lambda i: (scores[i]["hier_algbw_GBps"],
                                                    -frontier[i].allreduce_time_s))
    return Hierarchy(gpus_per_node, intra, scores, best)


def verification(verified_by: str, sample: int | None, seed: int | None
                 ) -> tuple[int, int] | None:
    """(sample, seed) of the verification by construction ``verified_by`` allows, or None
    (`search --verified-by`, --verify-sample, --verify-seed)."""
    ways = {w.strip() for w in str(verified_by).split(",") if w.strip()}
    unknown = ways - {"full", "symmetry", "construction"}
    if unknown or not {"full", "symmetry"} <= ways:
        raise TopofinderError(f"search: --verified-by {verified_by}: give full,symmetry or "
                              f"full,symmetry,construction")
    if sample is not None and (int(sample) != sample or sample < 1):
        raise TopofinderError(f"search: --verify-sample must be a positive integer, got "
                              f"{sample}")
    if seed is not None and (int(seed) != seed or seed < 0):
        raise TopofinderError(f"search: --verify-seed must be >= 0, got {seed}")
    if "construction" not in ways:
        if sample is not None:
            raise TopofinderError("search: --verify-sample needs construction in "
                                  "--verified-by")
        return None
    return (int(DEFAULT_SAMPLE if sample is None else sample),
            int(DEFAULT_SEED if seed is None else seed))


def search(n: int, d: int, workload: Workload | None = None, *, bidirectional: bool = False,
           jobs: int | None = None, use_cache: bool = True, progress: bool = False,
           kstep: bool = False, baselines: bool = False,
           moe: MoEWorkload | str | os.PathLike | None = None,
           gpus_per_node: int | None = None, intra: str = DEFAULT_INTRA,
           baseline_progress: Callable[[int, int, list[str]], None] | None = None,
           robust: bool = False, rank_by_robust: bool = False,
           price: str = "lockstep",
           cabled_from: str | os.PathLike | None = None, max_moves: int | None = None,
           moves_method: str | None = None,
           phases: str | os.PathLike | None = None,
           verified_by: str = "full,symmetry,construction", verify_sample: int | None = None,
           verify_seed: int | None = None) -> SearchResult:
    """The Pareto frontier of (T_L, τ) for ``n`` nodes of degree ``d``, every point built,
    replayed and scored, ranked by allreduce time for ``workload`` (default: α = 10 µs,
    B = 100 Gbps, M = 1 MB). ``kstep``: also routed k-step schedules (`search --kstep`).
    ``baselines``: also ShiftedRing, DBT and the closest torus with speedups (``.baselines``;
    ``baseline_progress(done, count, exprs)`` follows them); ``moe``: a MoE workload (file
    path or MoEWorkload): rank by iteration time, with its ``[network]`` α and bandwidth
    (:func:`network_workload`). ``gpus_per_node``: also score every point as a cluster of
    servers with that many GPUs on the ``intra`` fabric (``.hierarchy``). ``robust``: a
    ``robust`` column per point, its worst single fibre or node failure, exact by orbits
    (topofinder.resilience.robust); ``rank_by_robust``: recommend by it. ``cabled_from``: the
    fabric as cabled (patch-panel plan CSV, topology file or expression): every point gets
    ``moves`` (rows the diff from it unplugs, relabelled by ``moves_method``, default exact up
    to N = 256, else heuristic) and ``moves_lower_bound``, the cabled fabric joins at 0 moves,
    ``.moves["frontier"]`` lists the (objective, moves) Pareto points; ``max_moves`` keeps
    only points within that many moves (topofinder.resilience.moves). ``phases``: a phases
    TOML (topofinder.resilience.phases): ``.phases`` answers one fabric for all phases or one
    per phase with the switch cost counted, and the break-even; the frontier is then searched
    with all-to-all scores when a phase has an all-to-all share. ``verified_by``: the ways a
    point may be verified, comma-separated from full, symmetry, construction (full and
    symmetry always apply; construction: topofinder.finder.certify, with ``verify_sample``
    receivers replayed exactly, default DEFAULT_SAMPLE, and ``verify_seed``). ``price``:
    "lockstep" (default) ranks by T_L·α + τ·M/B, "async" by the dependency-driven time
    (docs/model.md); every point and baseline carries both."""
    if jobs is not None and jobs < 1:
        raise TopofinderError(f"search: --jobs must be >= 1, got {jobs}")
    if gpus_per_node is not None:                # refused before the search, not after it
        check_gpus(int(n) if str(n).isdigit() else 1, gpus_per_node)
        parse_intra(intra)
    if rank_by_robust and not robust:
        raise TopofinderError("search: --rank-by robust needs --robust")
    if max_moves is not None and cabled_from is None:
        raise TopofinderError("search: --max-moves needs --from PLAN.csv")
    if cabled_from is not None and (gpus_per_node is not None or robust):
        raise TopofinderError("search: --from does not combine with --gpus-per-node or "
                              "--robust")
    if moe is not None and not isinstance(moe, MoEWorkload):
        moe = load_moe(moe)
    workload = network_workload(workload, moe)
    spec = None
    if phases is not None:
        spec = _phases.load_phases(phases)
        need = max(w.alltoall_share for _, _, w in spec.phases)
        if need > workload.alltoall_share:
            workload = replace(workload, alltoall_share=need)
    if robust and workload is not None and workload.broadcast_share:
        raise TopofinderError("search: --robust prices the worst failure's allreduce and "
                              "all-to-all only; drop --broadcast-share or --robust")
    construction = verification(verified_by, verify_sample, verify_seed)
    result = _search(n, d, workload, bidirectional=bidirectional, jobs=jobs,
                     use_cache=use_cache, progress=progress or None, kstep=kstep,
                     baselines=baselines, moe=moe, baseline_progress=baseline_progress,
                     price=price, construction=construction)
    if robust:
        result = _robust.robust_search(result, workload, rank_by_robust)
    if spec is not None:
        result = replace(result, phases=_phases.phase_plan(result.frontier, result.n, result.d,
                                                           spec))
    if cabled_from is not None:
        result = _moves.move_aware(result, os.fspath(cabled_from), workload, max_moves,
                                   moves_method, jobs)
    if gpus_per_node is None:
        return result
    return replace(result, hierarchy=hierarchy(result.frontier, gpus_per_node, intra, workload))


def plot(result: SearchResult, path: str | os.PathLike) -> None:
    """Draw T_L against τ with the bounds, the recommendation and the baselines (.png, .svg)."""
    plot_frontier(result.to_dict(), os.fspath(path))


def records(result: SearchResult | dict) -> list[dict]:
    """Flat records of a search result or a score dict, for ``pandas.DataFrame``."""
    if isinstance(result, SearchResult):
        return result.records()
    if isinstance(result, dict):
        return [dict(result)]
    raise TopofinderError(f"records: expected a SearchResult or a score dict, got "
                          f"{type(result).__name__}")
