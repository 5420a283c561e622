"""The ``topofinder`` command (docs/cli.md). Parses arguments and prints; the work is elsewhere.

Bad input: one line on stderr saying what was wrong and what is accepted, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from fractions import Fraction
from pathlib import Path

from topofinder import api
from topofinder.batch import bench, sweep
from topofinder.compute import parallel
from topofinder.errors import TopofinderError
from topofinder.export.npz import save_npz
from topofinder.export.patch_panel import diff_plans, plan_patch_panel, read_plan
from topofinder.export.plot import plot_frontier
from topofinder.families.build import load_topology
from topofinder.families.catalog import listing
from topofinder.finder import catalog_build
from topofinder.model.files import write_topology
from topofinder.workload.cost import Workload
from topofinder.workload.rank import search

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of usage dumps."""

    def error(self, message: str):  # noqa: D401 - argparse hook
        raise TopofinderError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _add_score(sub) -> None:
    p = sub.add_parser("score", help="score one topology: N, d, diameter, T_L, tau, tau_fc, ...",
                       description="Score one topology given as an expression (e.g. "
                                   "'L^3(C(16,{3,4}))', 'Pi(4,1024)', 'Torus(8,8)') or a "
                                   "topology file (edge list, node-link JSON, GraphML): N, "
                                   "degree d, diameter; the optimal breadth-first-broadcast "
                                   "(BFB) allgather schedule's steps T_L and bandwidth time "
                                   "tau in units of M/B (exact fractions in *_exact); the "
                                   "bounds (Moore bound on steps, (N-1)/N on tau); tau_fc, "
                                   "the best tau any tree schedule reaches (ForestColl); the "
                                   "all-to-all concurrent flow f per unit link capacity with "
                                   "its certified upper bound; and, when the expression names "
                                   "a construction other than BFB (line graph, catalog "
                                   "schedule, ...), that schedule's own T_L and tau.")
    p.add_argument("expr", metavar="EXPR", help="topology expression or file path")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(run=_run_score)


def _run_score(args) -> int:
    info = api.score(args.expr)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            print(f"{key:<{width}}  {value}")
    return 0


def _add_export(sub) -> None:
    p = sub.add_parser("export", help="write a topology, schedule or patch-panel plan",
                       description="Export a topology (edge list, JSON, GraphML), a schedule "
                                   "or a patch-panel cabling plan.")
    p.add_argument("expr", metavar="EXPR",
                   help="topology expression or file path (with --pick: a search --json file)")
    p.add_argument("--pick", type=int, default=None, metavar="I",
                   help="EXPR is a 'search --json' result: export its frontier point I")
    p.add_argument("--what", choices=["topology", "schedule", "patch-panel"],
                   default="topology", help="what to export (default: topology)")
    p.add_argument("--kind", choices=["steps", "trees"], default="steps",
                   help="schedule: steps (step schedule) or trees (ForestColl tree-flow "
                        "schedule reaching T_B^FC, JSON)")
    p.add_argument("--collective", choices=["allgather", "reduce-scatter", "allreduce"],
                   default="allgather",
                   help="schedule: which collective (default allgather; reduce-scatter is an "
                        "allgather run backwards, allreduce is reduce-scatter then allgather)")
    p.add_argument("--trees-per-root", type=int, default=None, metavar="K",
                   help="trees: best schedule with exactly K trees per root (fixed-k)")
    p.add_argument("--low-trees", action="store_true",
                   help="trees: prefer low trees (heuristic)")
    p.add_argument("--format", default=None,
                   help="topology: edgelist (default), json (node-link), graphml; "
                        "schedule: json (default), xml (MSCCL-style), npz (compact, needs -o)")
    p.add_argument("--channels", type=int, default=1,
                   help="schedule xml: MSCCL channels, each moving 1/K of every chunk")
    p.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple",
                   help="schedule xml: MSCCL protocol (default Simple)")
    p.add_argument("--cabling", choices=["auto", "simplex", "duplex"], default="auto",
                   help="patch-panel: simplex fibres, duplex cables, or auto (duplex when "
                        "the topology is bidirectional)")
    p.add_argument("--panel-size", type=int, default=1008, metavar="PORTS",
                   help="patch-panel: ports per panel; each connection uses two (default 1008)")
    p.add_argument("--diff", default=None, metavar="OLD.csv",
                   help="patch-panel: list the fibres to move from the plan OLD.csv to this "
                        "topology (nodes relabelled to keep fibres), as action,... CSV rows")
    p.add_argument("-o", "--output", default=None, help="output file (default: stdout)")
    p.set_defaults(run=_run_export)


def _picked_expression(path: str, pick: int) -> str:
    """The expression of frontier point ``pick`` of a `search --json` result file."""
    try:
        with open(path) as f:
            frontier = json.load(f)["frontier"]
    except (OSError, ValueError, KeyError, TypeError):
        raise TopofinderError(f"export --pick: {path} is not a 'topofinder search --json' "
                              f"result") from None
    if not 0 <= pick < len(frontier):
        raise TopofinderError(f"export --pick {pick}: {path} has frontier points "
                              f"0..{len(frontier) - 1}")
    return frontier[pick]["expr"]


def _run_export(args) -> int:
    if args.pick is not None:
        args.expr = _picked_expression(args.expr, args.pick)

    if args.what == "patch-panel":
        return _export_patch_panel(args)
    if args.what == "schedule":
        return _export_schedule(args)
    topo = load_topology(args.expr)
    write_topology(topo, args.format or "edgelist", args.output)
    return 0


def _export_schedule(args) -> int:
    """The replay-validated step or tree schedule (:func:`topofinder.api.schedule`)."""
    schedule = api.schedule(args.expr, args.collective, args.kind, low_trees=args.low_trees,
                            trees_per_root=args.trees_per_root)
    _write_schedule(schedule, args)
    return 0


def _write_schedule(schedule, args) -> None:
    """Write a step or tree schedule as json, xml (MSCCL-style) or npz (docs/formats.md)."""
    fmt = args.format or "json"
    if fmt == "npz":
        if not args.output:
            raise TopofinderError("export: --format npz is binary; give an output file with -o")
        save_npz(schedule, args.output)
        return
    if fmt == "json":
        text = api.export_schedule(schedule, "json")
    elif fmt == "xml":
        text = api.export_schedule(schedule, "xml", channels=args.channels,
                                   protocol=args.protocol)
    else:
        raise TopofinderError(f"export: schedule format {fmt!r}; accepted are json, xml, npz")
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _export_patch_panel(args) -> int:
    """Patch-panel plan CSV, or with --diff the fibres to move (count on stderr)."""
    topo = load_topology(args.expr)
    if args.diff:
        diff = diff_plans(read_plan(args.diff), topo, args.cabling, args.panel_size)
        out = diff
        kept = diff.new.num_rows - diff.added.shape[0]
        print(f"patch-panel diff: {diff.moves} fibres to move ({diff.removed.shape[0]} "
              f"unplugged, {diff.added.shape[0]} plugged, {kept} kept)", file=sys.stderr)
    else:
        out = plan_patch_panel(topo, args.cabling, args.panel_size)
    if args.output:
        out.write_csv(args.output)
    else:
        out.write_csv(sys.stdout)
    return 0


def _add_search(sub) -> None:
    p = sub.add_parser(
        "search", help="find the Pareto-efficient topologies for N nodes of degree d and "
                       "recommend one for a workload",
        description="Generate topologies with N nodes of d ports each (line-graph, degree and "
                    "Cartesian expansions of small bases with known optimal schedules; "
                    "generalized Kautz, circulant, torus, hypercube, distance-regular and "
                    "other families), keep those Pareto-efficient in (T_L, tau), build each "
                    "one's allgather schedule, replay it to verify it, and score it. T_L: "
                    "communication steps, each costing the per-hop latency alpha. tau: "
                    "bandwidth time in units of M/B (M the allgather size, B the node "
                    "bandwidth); (N-1)/N is the optimum. tau_fc: the best tau any tree "
                    "schedule can reach on that topology (ForestColl). The frontier is ranked "
                    "by allreduce time 2(T_L*alpha + tau*M/B), optionally mixed with "
                    "all-to-all time, and the best point is recommended. Example: "
                    "topofinder search --n 1024 --d 4 --size 64MB --plot frontier.png",
        epilog="Export a recommended point with: topofinder export RESULT.json --pick I "
               "--what schedule (see 'topofinder export --help').")
    p.add_argument("--n", required=True, metavar="N", help="number of nodes (>= 2)")
    p.add_argument("--d", required=True, metavar="D", help="ports per node (1 <= d < N)")
    p.add_argument("--alpha", default="10us", help="per-step latency α (default 10us)")
    p.add_argument("--bandwidth", default="100Gbps",
                   help="node bandwidth B = d·b (default 100Gbps; Gbps = 10^9 bit/s)")
    p.add_argument("--size", default="1MB",
                   help="allreduce size M (KB/MB/GB = 1024-based bytes), or a weighted list "
                        "such as 1MB:0.7,64MB:0.3 (default 1MB)")
    p.add_argument("--alltoall-share", default="0", metavar="S",
                   help="share in [0, 1] of the ranking objective given to all-to-all of the "
                        "same per-node size (default 0)")
    p.add_argument("--bidirectional", action="store_true",
                   help="only topologies duplex cabling can realise")
    p.add_argument("--jobs", type=int, default=None, help="parallel workers (default: all cores)")
    p.add_argument("--kstep", action="store_true",
                   help="also try routed schedules with k = diameter and diameter + 1 steps on "
                        "the frontier topologies of up to 256 nodes (column generation; slower)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the disk cache")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="also draw T_L against tau with the bounds (FILE.png or FILE.svg)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(run=_run_search)


def _run_search(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise TopofinderError(f"search: --jobs must be >= 1, got {args.jobs}")
    if args.plot and not args.plot.lower().endswith((".png", ".svg")):
        raise TopofinderError(f"search: --plot {args.plot}: give a .png or .svg file name")
    workload = Workload.from_strings(args.alpha, args.bandwidth, args.size, args.alltoall_share)
    result = search(args.n, args.d, workload, bidirectional=args.bidirectional,
                    jobs=args.jobs, use_cache=not args.no_cache, progress=True,
                    kstep=args.kstep)
    if args.plot:
        plot_frontier(result, args.plot)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_frontier(result))
    return 0


def format_frontier(result: dict) -> str:
    """The frontier as an aligned table with the recommendation marked."""
    rows = [("", "expression", "T_L", "tau", "tau_fc", "diam", "flags", "allreduce",
             "all-to-all", "schedule")]
    for i, p in enumerate(result["frontier"]):
        flags = ("B" if p["bw_optimal"] else "-") + ("M" if p["moore_optimal"] else "-") + (
            "D" if p["bidirectional"] else "-")
        a2a = "" if p["alltoall_time_s"] is None else f"{p['alltoall_time_s'] * 1e6:.1f} us"
        fc = "" if p["tau_fc"] is None else f"{p['tau_fc']:.4f}"
        rows.append(("*" if i == result["recommended"] else "", p["expr"], str(p["T_L"]),
                     f"{p['tau']:.4f}", fc, str(p["diameter"]), flags,
                     f"{p['allreduce_time_s'] * 1e6:.1f} us", a2a, p["schedule"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"N = {result['N']}, d = {result['d']}: {len(result['frontier'])} Pareto-efficient "
             f"topologies (T_L in steps, tau and tau_fc in M/B)"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    best = result["frontier"][result["recommended"]]
    lines.append("flags: B = BW-optimal, M = Moore-optimal, D = bidirectional (duplex)")
    if not all(p["verified"] for p in result["frontier"]):
        lines.append("note: schedules too large to replay in memory were not built; their T_L "
                     "and tau are the exact BFB scores / theorem values (verified: false)")
    lines.append(f"recommended (*): {best['expr']} — allreduce "
                 f"{best['allreduce_time_s'] * 1e6:.1f} us for the workload")
    return "\n".join(lines)


def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="time the benchmark cases against their targets",
                       description="Median timings of the benchmark cases (building, BFB "
                                   "scoring, expansion schedules, ForestColl, all-to-all, "
                                   "search cold and warm, patch panels, catalog searches), "
                                   "each against its target, printed with the machine's core "
                                   "count and merged into results/bench.json.")
    p.add_argument("cases", nargs="*", metavar="WORD",
                   help="run only cases whose name contains one of these words")
    p.add_argument("--repeat", type=int, default=None, help="runs per case (default: per case)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=_run_bench)


def _run_bench(args) -> int:
    if args.repeat is not None and args.repeat < 1:
        raise TopofinderError("bench: --repeat must be a positive integer")
    report = bench.run(args.cases or None, args.repeat,
                       progress=lambda name: print(f"bench: {name} ...", file=sys.stderr))
    if not report["cases"]:
        raise TopofinderError(f"bench: no case matches {' '.join(args.cases)}")
    bench.write(report)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"machine: {report['machine']['cores']} cores, Python {report['machine']['python']}")
    for row in report["cases"]:
        target = "" if row["target_s"] is None else f"  target {row['target_s']:g} s  " + (
            "ok" if row["meets_target"] else "MISSED")
        print(f"{row['median_s']:9.4f} s  {row['name']}{target}")
    return 0


def _add_catalog(sub) -> None:
    p = sub.add_parser("catalog", help="list (or build) the base-topology catalog",
                       description="The catalog of small base topologies (complete, "
                                   "bipartite, Hamming, rings, search-found bases such as "
                                   "Diamond and DBJMod) with their stored allgather schedules "
                                   "and how each was found; the finder expands them.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    actions.required = True
    lst = actions.add_parser("list", help="N, d, T_L, tau, BW-/Moore-optimal flags, provenance")
    lst.add_argument("--json", action="store_true", help="print one JSON document")
    lst.set_defaults(run=_run_catalog_list)
    build = actions.add_parser(
        "build", help="exhaustive searches that find catalog bases",
        description="Enumerate small d-regular digraphs up to isomorphism (all of them, or the "
                    "rewirings of a de Bruijn graph), order them by BFB tau and search a "
                    "STEPS-step schedule with CHUNKS chunks per shard by CP-SAT; the first base "
                    "whose schedule reaches the target tau (default BW-optimal) is written to "
                    "catalog/ with the command that produced it. Presets: Diamond, "
                    "DBJMod(2,3), DBJMod(2,4), DBJMod(3,2), DBJMod(4,2).")
    build.add_argument("names", nargs="*", metavar="NAME",
                       help="presets to build ('all' for every preset); options override them")
    build.add_argument("--space", choices=["all", "dbj"], default=None,
                       help="candidates: every regular digraph (N <= 10) or DBJ rewirings")
    build.add_argument("--n", type=int, default=None, help="number of nodes N")
    build.add_argument("--d", type=int, default=None, help="degree d")
    build.add_argument("--steps", type=int, default=None, help="comm steps T of the schedule")
    build.add_argument("--chunks", type=int, default=None, help="chunks P per shard")
    build.add_argument("--target", default=None,
                       help="tau to reach in M/B, e.g. 7/8 (default (N-1)/N, BW-optimal)")
    build.add_argument("--reverse-symmetric", action="store_true", default=None,
                       help="only reverse-symmetric candidates (G^T isomorphic to G)")
    build.add_argument("--time-limit", type=float, default=None,
                       help="CP-SAT seconds per candidate (default 60)")
    build.add_argument("--budget", type=float, default=None,
                       help="seconds for the whole search (default 600)")
    build.add_argument("--all", dest="search_all", action="store_true", default=None,
                       help="keep searching after the first candidate reaching the target")
    build.add_argument("--name", default=None, help="entry expression for a custom search")
    build.add_argument("--no-write", action="store_true", help="report only, write nothing")
    build.add_argument("--json", action="store_true", help="print one JSON document")
    build.set_defaults(run=_run_catalog_build)


def _run_catalog_list(args) -> int:
    rows = listing()
    if args.json:
        print(json.dumps({"entries": rows}, indent=2))
        return 0
    print(f"{'expr':<24} {'N':>5} {'d':>3} {'T_L':>4} {'tau':>7}  BW  Moore  schedule  "
          f"provenance")
    for r in rows:
        prov = r["provenance"]
        origin = "; ".join(str(prov[k]) for k in ("method", "source") if prov.get(k))
        print(f"{r['expr']:<24} {r['N']:>5} {r['d']:>3} {r['T_L']:>4} {r['tau']:>7.4f}  "
              f"{'yes' if r['bw_optimal'] else 'no':<3} {'yes' if r['moore_optimal'] else 'no':<5}"
              f"  {r['schedule']:<8}  {origin}")
    return 0


def _run_catalog_build(args) -> int:
    names = list(catalog_build.PRESETS) if args.names == ["all"] else args.names or [args.name]
    if args.name and args.names:
        raise TopofinderError("catalog build: give preset NAMEs or --name, not both")
    try:
        target = None if args.target is None else Fraction(args.target)
    except (ValueError, ZeroDivisionError):
        raise TopofinderError(f"catalog build: --target {args.target!r} is not a number "
                              f"such as 7/8 or 0.875") from None

    def progress(row):
        if not args.json:
            print(f"  {row['candidate']}: diameter {row['diameter']}, BFB tau "
                  f"{row['tau_bfb']}, CP-SAT {row['status']} tau {row['tau']} "
                  f"({row['seconds']:.2f} s)", file=sys.stderr)

    reports = []
    for name in names:
        report = catalog_build.run(
            name, write=not args.no_write, progress=progress, space=args.space, n=args.n,
            d=args.d, steps=args.steps, chunks=args.chunks, target=target,
            reverse_symmetric=args.reverse_symmetric, time_limit=args.time_limit,
            budget=args.budget, search_all=args.search_all)
        reports.append(report)
        if not args.json:
            found = (f"T_L {report['T_L']}, tau {report['tau']}"
                     f"{' (BW-optimal)' if report['bw_optimal'] else ''}"
                     if report["found"] else "no schedule found")
            print(f"{report['name'] or 'search'}: {found}; {report['candidates']} candidates, "
                  f"{report['skipped_bfb_optimal']} BFB-optimal skipped, "
                  f"{len(report['searches'])} CP-SAT searches, {report['seconds']:.1f} s"
                  f"{'; wrote ' + report['path'] if report['path'] else ''}")
    if args.json:
        print(json.dumps({"builds": reports}, indent=2))
    return 0 if all(r["found"] for r in reports) else 1


def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="frontiers for many (N, d) from a spec file",
                       description="Run the finder for every (N, d) of a TOML spec and write "
                                   "OUT/<name>/: one file per cell (resumable), "
                                   "frontier.csv/.json, best.csv and the best-topology-per-N "
                                   "plots. A spec has: name = \"paper\"; degrees = [2, 4]; "
                                   "n = [32, 64] or n_min = 4 and n_max = 2000; bidirectional "
                                   "= false; verify = false (true: build and replay every "
                                   "frontier point); and a [workload] table with alpha = "
                                   "\"10us\", bandwidth = \"100Gbps\", sizes = [\"1MB\", "
                                   "\"100MB\"] (one best-per-N ranking per size).")
    p.add_argument("spec", metavar="SPEC.toml", help="sweep specification")
    p.add_argument("--jobs", type=int, default=None, help="parallel workers (default: all cores)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the disk cache")
    p.add_argument("--backend", choices=["loky", "dask"], default="loky",
                   help="joblib backend: local processes (loky) or a Dask cluster")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address (with --backend dask; default: a local cluster)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="results folder (default: ./results in the working directory)")
    p.set_defaults(run=_run_sweep)


def _run_sweep(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise TopofinderError(f"sweep: --jobs must be >= 1, got {args.jobs}")
    if args.scheduler and args.backend != "dask":
        raise TopofinderError("sweep: --scheduler needs --backend dask")
    spec = sweep.load_spec(args.spec)
    if args.backend == "dask":
        parallel.use_dask(args.scheduler)
    try:
        out = sweep.run_sweep(spec, Path(args.out) if args.out else sweep.RESULTS,
                              jobs=args.jobs, use_cache=not args.no_cache)
    finally:
        parallel.use_loky()
    print(f"sweep {spec.name}: {len(spec.cells)} cells written to {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="topofinder",
                     description="Topology/schedule co-design search for direct-connect "
                                 "fabrics: find, score and export topologies and collective "
                                 "schedules for N nodes with d ports each.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    _add_search(sub)
    _add_score(sub)
    _add_export(sub)
    _add_bench(sub)
    _add_catalog(sub)
    _add_sweep(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except TopofinderError as exc:
        print(f"topofinder: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("topofinder: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader closed stdout (e.g. `| head`): stop quietly, no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
