"""`topofinder search --n N --d D`: the verified frontier ranked for a workload
(:func:`topofinder.api.search`), printed as a table (:mod:`topofinder.cli.frontier`) or JSON."""

from __future__ import annotations

import sys

from topofinder import api
from topofinder.cli.common import add_workload, json_text
from topofinder.cli.frontier import format_frontier
from topofinder.errors import TopofinderError


def add(sub) -> None:
    p = sub.add_parser(
        "search", help="find the Pareto-efficient topologies for N nodes of degree d and "
                       "recommend one for a workload",
        description="""\
        Generate topologies with N nodes of d ports each (line-graph, degree and Cartesian
        expansions of small bases with known optimal schedules; generalized Kautz, circulant,
        torus, hypercube, distance-regular and other families), keep those Pareto-efficient in
        (T_L, tau), build each one's allgather schedule, replay it to verify it, and score it.
        T_L: communication steps, each costing the per-hop latency alpha. tau: bandwidth time
        in units of M/B (M the allgather size, B the node bandwidth); (N-1)/N is the optimum.
        tau_fc: the best tau any tree schedule can reach on that topology (ForestColl). The
        frontier is ranked by allreduce time 2(T_L*alpha + tau*M/B), optionally mixed with
        all-to-all time, and the best point is recommended. Example: topofinder search --n
        1024 --d 4 --size 64MB --plot frontier.png""",
        epilog="Export a recommended point with: topofinder export RESULT.json --pick I "
               "--what schedule (see 'topofinder export --help').")
    p.add_argument("--n", required=True, metavar="N", help="number of nodes (>= 2)")
    p.add_argument("--d", required=True, metavar="D", help="ports per node (1 <= d < N)")
    add_workload(p, " of the ranking's prices")
    p.add_argument("--alltoall-share", default="0", metavar="S",
                   help="share in [0, 1] of the ranking objective given to all-to-all of the "
                        "same per-node size (default 0)")
    p.add_argument("--broadcast-share", default="0", metavar="S",
                   help="share in [0, 1] of the ranking objective given to a one-root broadcast "
                        "of the same size, priced exactly at the steady-state multi-port "
                        "throughput TP from root 0 (time M/(TP*b), b = B/d; every root alike on "
                        "a vertex-transitive topology); the shares add up to at most 1 "
                        "(default 0)")
    p.add_argument("--bidirectional", action="store_true",
                   help="only topologies duplex cabling can realise")
    p.add_argument("--jobs", type=int, default=None, help="parallel workers (default: all cores)")
    p.add_argument("--kstep", action="store_true",
                   help="also try routed schedules with k = diameter and diameter + 1 steps on "
                        "the frontier topologies of up to 256 nodes (column generation; slower)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the disk cache")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="also draw T_L against tau with the bounds (FILE.png or FILE.svg)")
    p.add_argument("--gpus-per-node", type=int, default=None, metavar="G",
                   help="hierarchical cluster: every node is a server of G GPUs; each frontier "
                        "topology is composed with --intra and scored by ForestColl's optimum "
                        "over all GPUs (hier_algbw, GB/s)")
    p.add_argument("--intra", default=api.DEFAULT_INTRA, metavar="FABRIC",
                   help="with --gpus-per-node: the servers' internal fabric, 'NVSwitch BW' "
                        "(one switch, BW per GPU) or 'mesh BW' (all GPU pairs at BW)")
    p.add_argument("--workload", default=None, metavar="FILE.toml",
                   help="MoE training workload (compute time, allreduce buckets, expert-parallel "
                        "all-to-all size and count; see search/moe.toml): rank by iteration "
                        "time and print its split into compute, unoverlapped allreduce and "
                        "all-to-all; its [network] alpha and bandwidth win over the options")
    p.add_argument("--no-baselines", action="store_true",
                   help="do not score ShiftedRing, the double binary tree and the closest torus "
                        "at the same N and d (shown by default with the recommendation's "
                        "speedup over each)")
    p.add_argument("--robust", action="store_true",
                   help="add each point's worst single fibre or node failure as a column "
                        "('topofinder fail'); --plot shows it next to the intact time")
    p.add_argument("--rank-by", choices=["objective", "robust"], default="objective",
                   help="recommend by the intact objective (default) or by the worst "
                        "single-failure objective (needs --robust)")
    p.add_argument("--price", choices=["lockstep", "async"], default="lockstep",
                   help="which allreduce time ranks the frontier: lockstep, the paper's "
                        "T_L*alpha + tau*M/B (default: exact from T_L and tau, the frontier's "
                        "own axes, and an upper bound on the other), or async, the "
                        "dependency-driven time of the same schedule (each send starts when "
                        "its data has arrived and its link is free; what MSCCL and MPI "
                        "runtimes do); both are reported")
    p.add_argument("--from", dest="cabled_from", default=None, metavar="PLAN.csv",
                   help="the fabric as cabled (a patch-panel plan CSV, or a topology file or "
                        "expression): price every point in fibre moves from it (the remove "
                        "rows of 'export EXPR --what patch-panel --diff PLAN.csv'), with a "
                        "lower bound; the cabled fabric joins at 0 moves")
    p.add_argument("--max-moves", type=int, default=None, metavar="K",
                   help="with --from: keep only points within K moves")
    p.add_argument("--moves-method", choices=["exact", "heuristic"], default=None,
                   help="with --from: the diff's relabelling method (export's --diff-method) "
                        "for the moves (default: exact up to N = 256, heuristic above)")
    p.add_argument("--phases", default=None, metavar="WORKLOAD.toml",
                   help="a workload in phases (collective mix, size and share of time each, "
                        "reconfiguration cost: 'cost' for an OCS, 'per_move' for a patch "
                        "panel; docs/formats.md): answer one fabric for all phases or one "
                        "per phase with the switch cost counted, and the break-even")
    p.add_argument("--verified-by", default="full,symmetry,construction", metavar="WAYS",
                   help="how a frontier point may be verified: full (its schedule replayed), "
                        "symmetry (one source per orbit replayed), construction (a point built "
                        "by line-graph, degree or Cartesian expansions beyond the replay "
                        "limit: its operand replayed in full, each theorem's preconditions "
                        "checked, and a uniform sample of receivers replayed exactly from the "
                        "expansion rule; tau_fc, all-to-all and diameter are then not "
                        "computed). 'full,symmetry' keeps construction-only points under "
                        "skipped_points (default full,symmetry,construction)")
    p.add_argument("--verify-sample", type=int, default=None, metavar="K",
                   help="receivers replayed exactly per point verified by construction: a "
                        "fault touching a fraction p of the receivers is caught with "
                        "probability >= 1 - (1 - p)^K (default 32)")
    p.add_argument("--verify-seed", type=int, default=None, metavar="S",
                   help="seed of that sample (default 0; recorded in the point's "
                        "certificate)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.plot and not args.plot.lower().endswith((".png", ".svg")):
        raise TopofinderError(f"search: --plot {args.plot}: give a .png or .svg file name")
    workload = api.Workload.from_strings(args.alpha, args.bandwidth, args.size,
                                         args.alltoall_share, args.broadcast_share)
    result = api.search(args.n, args.d, workload, bidirectional=args.bidirectional,
                        jobs=args.jobs, use_cache=not args.no_cache, progress=True,
                        kstep=args.kstep, baselines=not args.no_baselines,
                        moe=args.workload, gpus_per_node=args.gpus_per_node,
                        intra=args.intra, baseline_progress=_baseline_progress,
                        robust=args.robust, rank_by_robust=args.rank_by == "robust",
                        price=args.price,
                        cabled_from=args.cabled_from, max_moves=args.max_moves,
                        moves_method=args.moves_method, phases=args.phases,
                        verified_by=args.verified_by, verify_sample=args.verify_sample,
                        verify_seed=args.verify_seed)
    if args.plot:
        api.plot(result, args.plot)
    doc = result.to_dict()
    print(json_text(doc) if args.json else format_frontier(doc))
    return 0


def _baseline_progress(done: int, count: int, exprs: list[str]) -> None:
    if done == 0:
        print(f"scoring {count} baselines: {', '.join(exprs)}", file=sys.stderr, flush=True)
    else:
        print(f"baselines scored: {done}/{count}", file=sys.stderr, flush=True)
