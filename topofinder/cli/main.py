"""The ``topofinder`` command (docs/cli.md). Parses arguments and prints; the work is elsewhere.

Bad input: one line on stderr saying what was wrong and what is accepted, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import shlex
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path

from topofinder.compute.output import write_text
from topofinder import api
from topofinder.batch import bench, sweep
from topofinder.compute import parallel
from topofinder.errors import TopofinderError
from topofinder.execute import is_quiet_rank
from topofinder.execute import mpi as execute_mpi
from topofinder.export.npz import save_npz
from topofinder.export.check import apply_diff, check, read_sends
from topofinder.export.patch_panel import diff_plans, plan_patch_panel, read_plan
from topofinder.export.physical import configure, connect_changes, make_layout, write_changes
from topofinder.export.ranks import ranks_text
from topofinder.export.relabel import read_mapping, relabel_topology
from topofinder.export.plot import plot_frontier
from topofinder.export.schedule_xml import check_fits
from topofinder.families.build import load_topology
from topofinder.families.catalog import listing
from topofinder.finder import affine_catalog, catalog_build
from topofinder.finder.recipe import from_expression
from topofinder.finder.verify import allgather_schedule
from topofinder.model.files import write_topology
from topofinder.workload.cost import Workload
from topofinder.workload.moe import load_moe
from topofinder.workload.rank import search
from topofinder.workload.hierarchy import hierarchical_score, parse_intra

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
#: Most runs per bench case (medians settle long before; more is a typo).
MAX_BENCH_REPEAT = 1000


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
    _add_undirected(p)
    p.add_argument("--alltoall", choices=["bracket", "exact", "bound"], default="bracket",
                   help="all-to-all concurrent flow: a certified bracket [alltoall_f, "
                        "alltoall_f_upper] of relative gap <= --alltoall-gap (default), the "
                        "exact LP optimum, or only the hop-count and Moore bounds")
    p.add_argument("--alltoall-gap", type=float, default=0.01, metavar="G",
                   help="largest relative gap of the all-to-all bracket (default 0.01)")
    p.add_argument("--fc-time-limit", type=float, default=api.FC_TIME_LIMIT, metavar="S",
                   help="seconds of ForestColl max-flows before tau_fc is reported as a "
                        "certified bracket [tau_fc, tau_fc_upper] with tau_fc_optimal false "
                        f"(default {api.FC_TIME_LIMIT:g}; 0: no limit, always exact)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(run=_run_score)


def _add_undirected(p) -> None:
    p.add_argument("--undirected", action="store_const", const=True, default=None,
                   help="topology file: every line/edge is one undirected cable (two arcs), "
                        "as networkx.write_edgelist writes")
    p.add_argument("--directed", dest="undirected", action="store_const", const=False,
                   help="topology file: read every line/edge as one arc even when the file "
                        "looks like one line per cable")


def _source(args):
    """EXPR as given, or the topology read from a file with --undirected/--directed."""
    if args.undirected is None:
        return args.expr
    return api.load(args.expr, undirected=args.undirected)


def _bracket_progress():
    """A stderr line following the all-to-all bracket: iteration, [lower, upper], gap, time."""
    start = time.perf_counter()

    def show(iteration, lower, upper):
        print(f"\rall-to-all bracket: iteration {iteration}, [{lower:.4e}, {upper:.4e}], gap "
              f"{(upper - lower) / upper:.2%}, {time.perf_counter() - start:.0f} s",
              end="", file=sys.stderr, flush=True)
    return show


def _stage_progress():
    """A stderr line for a long scoring stage: items done, elapsed time and an ETA."""
    start: dict[str, float] = {}

    def show(stage, done, total):
        began = start.setdefault(stage, time.perf_counter())
        spent = time.perf_counter() - began
        eta = spent / done * (total - done) if done else float("nan")
        print(f"\r\033[Kscore: {stage} {done}/{total}, {spent:.0f} s, ETA {eta:.0f} s",
              end="", file=sys.stderr, flush=True)
    return show


def _run_score(args) -> int:
    if not 0 < args.alltoall_gap < 1:
        raise TopofinderError(f"score: --alltoall-gap must lie in (0, 1), got "
                              f"{args.alltoall_gap}")
    if not args.fc_time_limit >= 0 or args.fc_time_limit == float("inf"):
        raise TopofinderError(f"score: --fc-time-limit must be a finite number of seconds "
                              f">= 0, got {args.fc_time_limit}")
    tty = sys.stderr is not None and sys.stderr.isatty()
    info = api.score(_source(args), alltoall=args.alltoall, alltoall_gap=args.alltoall_gap,
                     progress=_bracket_progress() if tty else None,
                     stages=_stage_progress() if tty else None,
                     fc_time_limit=args.fc_time_limit or None)
    if tty:
        print("\r\033[K", end="", file=sys.stderr)
    if args.json:
        print(_json(info))
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
    p.add_argument("--what", choices=["topology", "schedule", "patch-panel", "ranks",
                                      "cross-connects"],
                   default="topology",
                   help="what to export (default: topology); ranks: which host runs which "
                        "rank (node names from the topology file); cross-connects: the "
                        "panel-port cross-connects of a fixed node-port-to-panel layout")
    p.add_argument("--kind", choices=["steps", "trees"], default="steps",
                   help="schedule: steps (step schedule) or trees (ForestColl tree-flow "
                        "schedule reaching T_B^FC, JSON)")
    p.add_argument("--collective", choices=["allgather", "reduce-scatter", "allreduce",
                                            "alltoall"],
                   default="allgather",
                   help="schedule: which collective (default allgather). Steps: reduce-scatter "
                        "is an allgather run backwards, allreduce is reduce-scatter then "
                        "allgather, alltoall is a k-step schedule of piece fractions from a "
                        "time-expanded LP (json only; its bandwidth time, steps and the LP "
                        "bound 1/f on stderr). Trees: out-trees, in-trees, or in-trees then "
                        "out-trees, reported next to the allreduce tree optimum")
    p.add_argument("--steps", type=int, default=None, metavar="K",
                   help="alltoall: exactly K steps (>= the diameter; fewer steps cost less "
                        "latency, maybe more bandwidth time); default: the least bandwidth "
                        "time over diameter..diameter+2 steps")
    p.add_argument("--trees-per-root", type=int, default=None, metavar="K",
                   help="trees: best schedule with exactly K trees per root (fixed-k)")
    p.add_argument("--low-trees", action="store_true",
                   help="trees: prefer low trees (heuristic)")
    p.add_argument("--format", default=None,
                   help="topology: edgelist (default), json (node-link), graphml; "
                        "schedule: json (default), xml (MSCCL-style), npz (compact, needs -o); "
                        "ranks: csv (default), hostfile, rankfile (Open MPI), torchrun")
    p.add_argument("--channels", type=int, default=1,
                   help="schedule xml: MSCCL channels, each moving 1/K of every chunk")
    p.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple",
                   help="schedule xml: MSCCL protocol (default Simple)")
    p.add_argument("--runtime", choices=["msccl-executor", "msccl"], default="msccl-executor",
                   help="schedule xml: the MSCCL runtime that loads it (coll spelling, maxBytes "
                        "rule, limits; default msccl-executor)")
    p.add_argument("--max-steps", type=int, default=None, metavar="K",
                   help="schedule xml: instructions per threadblock the runtime allows "
                        "(MSCCL_MAX_NUM_STEPS; default 64 for msccl-executor, 256 for msccl)")
    place = p.add_mutually_exclusive_group()
    place.add_argument("--in-place", dest="inplace", action="store_true", default=False,
                       help="schedule xml: the in-place variant (NCCL's in-place buffers)")
    place.add_argument("--out-of-place", dest="inplace", action="store_false",
                       help="schedule xml: the out-of-place variant (default)")
    p.add_argument("--min-bytes", type=int, default=0, metavar="BYTES",
                   help="schedule xml: smallest message size the runtime may pick it for")
    p.add_argument("--max-bytes", type=int, default=None, metavar="BYTES",
                   help="schedule xml: largest message size it may be picked for "
                        "(default unbounded)")
    p.add_argument("--cabling", choices=["auto", "simplex", "duplex"], default="auto",
                   help="patch-panel: simplex fibres, duplex cables, or auto (duplex when "
                        "the topology is bidirectional)")
    p.add_argument("--panel-size", type=int, default=1008, metavar="PORTS",
                   help="patch-panel: ports per panel; each connection uses two (default 1008)")
    p.add_argument("--trunks", type=int, default=None, metavar="T",
                   help="cross-connects: trunk fibres per ordered pair of panels (default: "
                        "the fewest the configurations need)")
    p.add_argument("--layout", default=None, metavar="LAYOUT.csv",
                   help="cross-connects: also write the fixed layout (which node port end "
                        "and trunk end sits on which panel port)")
    p.add_argument("--diff", default=None, metavar="OLD.csv",
                   help="patch-panel: list the fibres to move from the plan OLD.csv to this "
                        "topology (nodes relabelled to keep fibres: an exact isomorphism "
                        "when there is one, else a QAP search), as action,... CSV rows")
    p.add_argument("--mapping", default=None, metavar="MAP.csv",
                   help="with --diff: write the relabelling (node,node_label,physical_node,"
                        "physical_label) here (default with -o OUT.csv: OUT-mapping.csv)")
    p.add_argument("--diff-method", choices=["exact", "heuristic"], default="exact",
                   help="with --diff: exact (isomorphism test, then QAP search; default) or "
                        "heuristic (iterated linear assignment only)")
    p.add_argument("--relabel", default=None, metavar="MAP.csv",
                   help="topology, schedule, ranks: rename nodes by a diff's mapping, so the "
                        "export uses the numbering of the cables after the diff")
    _add_undirected(p)
    p.add_argument("-o", "--output", default=None, help="output file (default: stdout)")
    p.set_defaults(run=_run_export)


def _picked_expression(path: str, pick: int) -> str:
    """The expression of frontier point ``pick`` of a `search --json` result file."""
    not_a_result = f"export --pick: {path} is not a 'topofinder search --json' result"
    try:
        with open(path, encoding="utf-8") as f:
            frontier = json.load(f)["frontier"]
    except (OSError, ValueError, KeyError, TypeError):
        raise TopofinderError(not_a_result) from None
    if not isinstance(frontier, list) or not frontier:
        raise TopofinderError(f"{not_a_result} (no frontier list)")
    if not 0 <= pick < len(frontier):
        raise TopofinderError(f"export --pick {pick}: {path} has frontier points "
                              f"0..{len(frontier) - 1}")
    point = frontier[pick]
    if not isinstance(point, dict) or not isinstance(point.get("expr"), str):
        raise TopofinderError(f"{not_a_result} (frontier point {pick} has no 'expr' string)")
    return point["expr"]


def _run_export(args) -> int:
    if args.pick is not None:
        args.expr = _picked_expression(args.expr, args.pick)

    if args.relabel and args.what == "patch-panel":
        raise TopofinderError("export: --relabel applies to topology, schedule and ranks; a "
                              "diff's patch plan is already in the old plan's numbering")
    if (args.mapping or args.diff_method != "exact") and not args.diff:
        raise TopofinderError("export: --mapping and --diff-method need --diff OLD.csv")
    mapping = read_mapping(args.relabel) if args.relabel else None
    if args.what in ("patch-panel", "cross-connects"):
        return _export_patch_panel(args)
    if args.what == "schedule":
        return _export_schedule(args, mapping)
    topo = api.load(args.expr, undirected=args.undirected)
    if mapping is not None:
        topo = relabel_topology(topo, mapping)
    if args.what == "ranks":
        write_text(args.output, ranks_text(topo, args.format or "csv"))
        return 0
    write_topology(topo, args.format or "edgelist", args.output)
    return 0


def _export_schedule(args, mapping=None) -> int:
    """The replay-validated step or tree schedule (:func:`topofinder.api.schedule`), renamed
    by a diff's mapping when given. For XML the runtime's limits are checked first on the
    allgather (cheap, before the whole schedule is built), then on the schedule itself;
    nothing is written when it does not fit."""
    source = _source(args)
    if args.collective == "alltoall":
        return _export_alltoall(args, source, mapping)
    if args.steps is not None:
        raise TopofinderError("export: --steps applies to --collective alltoall")
    if args.format == "xml" and args.kind == "steps" and isinstance(source, str) \
            and not os.path.isfile(source):
        check_fits(allgather_schedule(from_expression(source)), args.channels, args.runtime,
                   args.max_steps, collective=args.collective)
    schedule = api.schedule(source, args.collective, args.kind, low_trees=args.low_trees,
                            trees_per_root=args.trees_per_root)
    if mapping is not None:
        schedule = api.relabel(schedule, mapping)
    if args.format == "xml" and args.kind == "steps":
        check_fits(schedule, args.channels, args.runtime, args.max_steps)
    if args.kind == "trees" and (args.format or "json") != "json":
        if args.collective != "allgather":
            raise TopofinderError(f"export: {args.collective} tree schedules are written as "
                                  f"json")
        if schedule.topology.has_switches:
            raise TopofinderError("export: tree schedules with routes through switches are "
                                  "written as json")
    _write_schedule(schedule, args, None if mapping is None else mapping.physical)
    return 0


def _export_alltoall(args, source, mapping) -> int:
    """The replay-validated all-to-all step schedule as json; one stderr line compares its
    bandwidth time Σ_t max-load (units of (M/N)/b) with the LP bound 1/f."""
    if args.kind != "steps":
        raise TopofinderError("export: --collective alltoall builds a step schedule; --kind "
                              "trees applies to allgather, reduce-scatter and allreduce")
    if (args.format or "json") != "json":
        raise TopofinderError(f"export: all-to-all schedules are written as json, not "
                              f"{args.format}")
    if args.low_trees or args.trees_per_root is not None:
        raise TopofinderError("export: --low-trees and --trees-per-root apply to tree "
                              "schedules, not to all-to-all")
    start = time.perf_counter()
    schedule = api.schedule(source, "alltoall", steps=args.steps)
    if mapping is not None:
        schedule = api.relabel(schedule, mapping)
    write_text(args.output, api.export_schedule(
        schedule, "json", physical=None if mapping is None else mapping.physical))
    print(f"all-to-all schedule of {schedule.topology.expr}: {schedule.num_steps} steps, "
          f"bandwidth time {schedule.bandwidth_time:.6g} (M/N)/b, LP bound 1/f = "
          f"{schedule.bound:.6g}, gap {schedule.gap:.2e}, {schedule.num_sends} sends, "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


def _write_schedule(schedule, args, physical=None) -> None:
    """Write a step or tree schedule as json, xml (MSCCL-style) or npz (docs/formats.md)."""
    fmt = args.format or "json"
    if fmt == "npz":
        if not args.output:
            raise TopofinderError("export: --format npz is binary; give an output file with -o")
        save_npz(schedule, args.output)
        return
    if fmt == "json":
        text = api.export_schedule(schedule, "json", physical=physical)
    elif fmt == "xml":
        text = api.export_schedule(schedule, "xml", channels=args.channels,
                                   protocol=args.protocol, runtime=args.runtime,
                                   inplace=args.inplace, max_steps=args.max_steps,
                                   min_bytes=args.min_bytes, max_bytes=args.max_bytes,
                                   physical=physical)
    else:
        raise TopofinderError(f"export: schedule format {fmt!r}; accepted are json, xml, npz")
    write_text(args.output, text)


def _export_patch_panel(args) -> int:
    """Patch-panel plan CSV, or with --diff the fibres to move (count on stderr)."""
    topo = api.load(args.expr, undirected=args.undirected)
    if args.diff:
        diff = diff_plans(read_plan(args.diff), topo, args.cabling, args.panel_size,
                          method=args.diff_method)
        out = diff
        kept = diff.new.num_rows - diff.added.shape[0]
        iso = {True: "isomorphic to the old cabling", False: "not isomorphic",
               None: "isomorphism not decided (install pynauty)"}[diff.isomorphic]
        print(f"patch-panel diff: {diff.moves} fibres to move ({diff.removed.shape[0]} "
              f"unplugged, {diff.added.shape[0]} plugged, {kept} kept); {iso}; relabelling "
              f"by {diff.method}", file=sys.stderr)
        mapping = args.mapping
        if mapping is None and args.output:
            stem = args.output[:-4] if args.output.lower().endswith(".csv") else args.output
            mapping = stem + "-mapping.csv"
        if mapping:
            diff.write_mapping(mapping)
            print(f"relabelling written to {mapping}; export the schedule as cabled after "
                  f"the diff with: topofinder export {shlex.quote(args.expr)} --what schedule "
                  f"--relabel {shlex.quote(mapping)}", file=sys.stderr)
    else:
        out = plan_patch_panel(topo, args.cabling, args.panel_size)
    if args.what == "cross-connects":
        return _export_cross_connects(args, topo, out)
    if args.output:
        out.write_csv(args.output)
    else:
        out.write_csv(sys.stdout)
    return 0


def _export_cross_connects(args, topo, out) -> int:
    """The configuration (or, with --diff, the cross-connect changes) on a fixed layout."""
    plans = [out.old, out.new] if args.diff else [out]
    d = max([topo.degree] + [int(p.rows[:, [3, 5]].max()) + 1 for p in plans if p.num_rows])
    if args.trunks is not None and args.trunks < 0:
        raise TopofinderError("export: --trunks must be >= 0")
    layout = make_layout(plans[0].n, d, args.panel_size, plans, args.trunks)
    if args.layout:
        layout.write_csv(args.layout)
    summary = (f"layout: {layout.panels} panel(s) of {layout.panel_size} ports, "
               f"{layout.per_panel} nodes each, "
               f"{sum(t for _, _, t in layout.trunks)} trunk fibres, at most "
               f"{layout.ports_used} ports used per panel")
    first = configure(layout, plans[0])
    target = sys.stdout if not args.output else args.output
    if args.diff:
        removed, added = connect_changes(first, configure(layout, plans[1], previous=first))
        print(f"cross-connects: {len(removed)} to remove, {len(added)} to add; {summary}",
              file=sys.stderr)
        write_changes(removed, added, target)
    else:
        print(f"cross-connects: {len(first.connects)}; {summary}", file=sys.stderr)
        first.write_csv(target)
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
    p.add_argument("--gpus-per-node", type=int, default=None, metavar="G",
                   help="hierarchical cluster: every node is a server of G GPUs; each frontier "
                        "topology is composed with --intra and scored by ForestColl's optimum "
                        "over all GPUs (hier_algbw, GB/s)")
    p.add_argument("--intra", default="NVSwitch 300GB/s", metavar="FABRIC",
                   help="with --gpus-per-node: the servers' internal fabric, 'NVSwitch BW' "
                        "(one switch, BW per GPU) or 'mesh BW' (all GPU pairs at BW)")
    p.add_argument("--workload", default=None, metavar="FILE.toml",
                   help="MoE training workload (compute time, allreduce buckets, expert-parallel "
                        "all-to-all size and count; see search/moe.toml): rank by iteration "
                        "time and print its split into compute, unoverlapped allreduce and "
                        "all-to-all")
    p.add_argument("--no-baselines", action="store_true",
                   help="do not score ShiftedRing, the double binary tree and the closest torus "
                        "at the same N and d (shown by default with the recommendation's "
                        "speedup over each)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(run=_run_search)


def _run_search(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise TopofinderError(f"search: --jobs must be >= 1, got {args.jobs}")
    if args.plot and not args.plot.lower().endswith((".png", ".svg")):
        raise TopofinderError(f"search: --plot {args.plot}: give a .png or .svg file name")
    workload = Workload.from_strings(args.alpha, args.bandwidth, args.size, args.alltoall_share)
    moe = load_moe(args.workload) if args.workload else None
    if moe is not None and (moe.alpha_s is not None or moe.bandwidth_Bps is not None):
        labels = dict(workload.labels)
        labels.update({k: v for k, v in (("alpha", moe.alpha_s), ("bandwidth",
                      moe.bandwidth_Bps)) if v is not None})
        workload = Workload(moe.alpha_s if moe.alpha_s is not None else workload.alpha_s,
                            moe.bandwidth_Bps if moe.bandwidth_Bps is not None
                            else workload.bandwidth_Bps, workload.sizes,
                            workload.alltoall_share, {"size": labels.get("size", "")})
    result = search(args.n, args.d, workload, bidirectional=args.bidirectional,
                    jobs=args.jobs, use_cache=not args.no_cache, progress=True,
                    kstep=args.kstep, baselines=not args.no_baselines, moe=moe,
                    baseline_progress=_baseline_progress).to_dict()
    if args.gpus_per_node is not None:
        _add_hierarchy(result, args)
    if args.plot:
        plot_frontier(result, args.plot)
    if args.json:
        print(_json(result))
    else:
        print(format_frontier(result))
    return 0


def _add_hierarchy(result: dict, args) -> None:
    """ForestColl on each frontier topology composed with the servers' internal fabric."""
    parse_intra(args.intra)
    for p in result["frontier"]:
        p.update(hierarchical_score(load_topology(p["expr"]), args.gpus_per_node, args.intra,
                                    args.bandwidth))
    best = max(range(len(result["frontier"])),
               key=lambda i: (result["frontier"][i]["hier_algbw_GBps"],
                              -result["frontier"][i]["allreduce_time_s"]))
    result["hierarchy"] = {"gpus_per_node": args.gpus_per_node, "intra": args.intra,
                           "recommended": best}


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
    if "hierarchy" in result:
        rows[0] += ("GPU algbw",)
        for i, p in enumerate(result["frontier"]):
            mark = " <" if i == result["hierarchy"]["recommended"] else ""
            rows[i + 1] += (f"{p['hier_algbw_GBps']:.2f} GB/s{mark}",)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"N = {result['N']}, d = {result['d']}: {len(result['frontier'])} Pareto-efficient "
             f"topologies (T_L in steps, tau and tau_fc in M/B)"]
    if "hierarchy" in result:
        h = result["hierarchy"]
        lines.append(f"servers of {h['gpus_per_node']} GPUs, intra {h['intra']}: GPU algbw = "
                     "ForestColl's allgather optimum M/T over all GPUs (< marks the best)")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    best = result["frontier"][result["recommended"]]
    lines.append("flags: B = BW-optimal, M = Moore-optimal, D = bidirectional (duplex)")
    if not all(p["verified"] for p in result["frontier"]):
        lines.append("note: schedules too large to replay in memory were not built; their T_L "
                     "and tau are the exact BFB scores / theorem values (verified: false)")
    lines.append(f"recommended (*): {best['expr']} — allreduce "
                 f"{best['allreduce_time_s'] * 1e6:.1f} us for the workload")
    if "moe" in result:
        lines += _format_iterations(result)
    if result.get("baselines"):
        lines += _format_baselines(result)
    return "\n".join(lines)


def _baseline_progress(done: int, count: int, exprs: list[str]) -> None:
    if done == 0:
        print(f"scoring {count} baselines: {', '.join(exprs)}", file=sys.stderr, flush=True)
    else:
        print(f"baselines scored: {done}/{count}", file=sys.stderr, flush=True)


def _ms(x) -> str:
    return "" if x is None else f"{x * 1e3:.2f} ms"


def _us(x) -> str:
    return "" if x is None else f"{x * 1e6:.1f} us"


def _speed(x) -> str:
    return "" if x is None else f"{x:.2f}x"


def _table(rows) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _format_iterations(result: dict) -> list[str]:
    """The MoE iteration split of every frontier point (paper 001 Fig. 9)."""
    m = result["moe"]
    rows = [("", "expression", "compute", "allreduce (unoverlapped)", "all-to-all",
             "iteration")]
    for i, p in enumerate(result["frontier"]):
        it = p["iteration"]
        rows.append(("*" if i == result["recommended"] else "", p["expr"], _ms(it["compute_s"]),
                     _ms(it["allreduce_unoverlapped_s"]), _ms(it["alltoall_s"]),
                     _ms(it["iteration_s"])))
    for b in result.get("baselines", []):
        if b.get("iteration"):
            it = b["iteration"]
            rows.append(("b", f"{b['name']}: {b['expr']}", _ms(it["compute_s"]),
                         _ms(it["allreduce_unoverlapped_s"]), _ms(it["alltoall_s"]),
                         _ms(it["iteration_s"])))
    head = (f"MoE iteration ({m['file']}): {len(m['buckets_bytes'])} allreduce bucket(s)"
            f"{' overlapping backward' if m['overlap'] else ''}, {m['alltoall_count']} "
            f"all-to-all(s) of {m['alltoall_bytes'] / 2 ** 20:g} MB per node; "
            "* recommended, b baseline")
    it = result["frontier"][result["recommended"]]["iteration"]
    tail = (f"recommended (*) for the MoE iteration: "
            f"{result['frontier'][result['recommended']]['expr']} — {_ms(it['iteration_s'])} "
            f"= compute {_ms(it['compute_s'])} + unoverlapped allreduce "
            f"{_ms(it['allreduce_unoverlapped_s'])} + all-to-all {_ms(it['alltoall_s'])}")
    return ["", head] + _table(rows) + [tail]


def _format_baselines(result: dict) -> list[str]:
    """Each baseline's times and how much faster the recommendation is (paper 001 Fig. 7)."""
    moe = "moe" in result
    rows = [("baseline", "expression", "T_L", "tau", "schedule", "allreduce", "all-to-all",
             "speedup allreduce", "speedup all-to-all")
            + (("speedup iteration",) if moe else ())]
    notes = []
    for b in result["baselines"]:
        if b["expr"] is None:
            notes.append(f"{b['name']}: {b['note']}")
            continue
        sp = b["speedup"]
        rows.append((b["name"], b["expr"], str(b["T_L"]), f"{float(Fraction(b['tau'])):.4f}",
                     b["schedule"], _us(b["allreduce_time_s"]), _us(b["alltoall_time_s"]),
                     _speed(sp["allreduce"]), _speed(sp["alltoall"]))
                    + ((_speed(sp["objective"]),) if moe else ()))
        if b["note"]:
            notes.append(f"{b['name']}: {b['note']}")
    lines = ["", "baselines at the same N and d (speedup = baseline time / recommended time; "
                 "all-to-all at the baseline's upper f, so a lower bound)"]
    if len(rows) > 1:
        lines += _table(rows)
    return lines + notes


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
    if args.repeat is not None and not 1 <= args.repeat <= MAX_BENCH_REPEAT:
        raise TopofinderError(f"bench: --repeat must be an integer in 1..{MAX_BENCH_REPEAT}")
    bench.read()                                  # a bad results/bench.json fails before timing
    report = bench.run(args.cases or None, args.repeat,
                       progress=lambda name: print(f"bench: {name} ...", file=sys.stderr))
    if not report["cases"]:
        raise TopofinderError(f"bench: no case matches {' '.join(args.cases)}")
    bench.write(report)
    if args.json:
        print(_json(report))
        return 0
    print(f"machine: {report['machine']['cores']} cores, Python {report['machine']['python']}")
    for row in report["cases"]:
        target = "" if row["target_s"] is None else f"  target {row['target_s']:g} s  " + (
            "ok" if row["meets_target"] else "MISSED")
        failed = f"  FAILED: {row['failed']}" if row.get("failed") else ""
        print(f"{row['median_s']:9.4f} s  {row['name']}{target}{failed}")
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
    aff = actions.add_parser(
        "affine", help="search affine digraphs Aff(N,q,{a,...}) for every N (bases)",
        description="For every N in N_MIN..N_MAX and each degree, draw TRIES seeded affine "
                    "digraphs x -> q*x + a mod N (loops rewired into a cycle), keep those with "
                    "diameter <= that of Pi(d,N) + 2, score each by BFB and store the Pareto "
                    "set in (diameter, tau) in catalog/affine.json, which the finder reads as "
                    "bases (nothing is searched during `search`).")
    aff.add_argument("--d", type=int, nargs="+", default=[4], help="degrees (default 4)")
    aff.add_argument("--n-min", type=int, default=5, help="smallest N (default 5)")
    aff.add_argument("--n-max", type=int, default=2000, help="largest N (default 2000)")
    aff.add_argument("--tries", type=int, default=affine_catalog.DEFAULT_TRIES,
                     help=f"draws per (N, d) (default {affine_catalog.DEFAULT_TRIES})")
    aff.add_argument("--seed", type=int, default=affine_catalog.DEFAULT_SEED,
                     help=f"seed of the draws (default {affine_catalog.DEFAULT_SEED})")
    aff.add_argument("--jobs", type=int, default=None, help="worker processes (default: all)")
    aff.add_argument("-o", "--output", default=None,
                     help="catalog file to write (default: the shipped catalog/affine.json)")
    aff.set_defaults(run=_run_catalog_affine)


def _run_catalog_affine(args) -> int:
    if not all(1 <= d <= 64 for d in args.d) or args.tries < 1 or not 5 <= args.n_min <= \
            args.n_max <= 100_000:
        raise TopofinderError("catalog affine: needs 1 <= d <= 64, --tries >= 1 and "
                              "5 <= --n-min <= --n-max <= 100000")
    if args.jobs is not None and args.jobs < 1:
        raise TopofinderError(f"catalog affine: --jobs must be >= 1, got {args.jobs}")
    path = Path(args.output) if args.output else affine_catalog.CATALOG_FILE
    doc = affine_catalog.build_catalog(args.d, args.n_min, args.n_max, path,
                                       tries=args.tries, seed=args.seed, jobs=args.jobs)
    built = [doc["degrees"][str(d)] for d in args.d]
    count = sum(len(b["entries"]) for b in built)
    print(f"catalog affine: {count} (N, d) with entries, {built[0]['provenance']['seconds']} s; "
          f"wrote {path}")
    return 0


def _run_catalog_list(args) -> int:
    rows = listing()
    if args.json:
        print(_json({"entries": rows}))
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
                     if report["found"] else
                     "nothing to store: BFB already reaches the target on every candidate"
                     if report["candidates"] and
                     report["skipped_bfb_optimal"] == report["candidates"]
                     else "no schedule found")
            print(f"{report['name'] or 'search'}: {found}; {report['candidates']} candidates, "
                  f"{report['skipped_bfb_optimal']} BFB-optimal skipped, "
                  f"{len(report['searches'])} CP-SAT searches, {report['seconds']:.1f} s"
                  f"{'; wrote ' + report['path'] if report['path'] else ''}")
    if args.json:
        print(_json({"builds": reports}))
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
        out, failed = sweep.run_sweep(spec, Path(args.out) if args.out else sweep.RESULTS,
                                      jobs=args.jobs, use_cache=not args.no_cache)
    finally:
        parallel.use_loky()
    done = len(spec.cells) - len(failed)
    print(f"sweep {spec.name}: {done} of {len(spec.cells)} cells written to {out}"
          + (f"; {len(failed)} failed (listed in {out / 'failed.csv'}; a rerun retries "
             f"them), first: N = {failed[0]['N']}, d = {failed[0]['d']}: {failed[0]['error']}"
             if failed else ""))
    return 1 if failed else 0


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="execute a schedule under MPI and check it against MPI's "
                                   "collective (mpiexec -n N topofinder run SCHEDULE.json)",
                       description=execute_mpi.DESCRIPTION)
    execute_mpi.add_arguments(p)
    p.set_defaults(run=execute_mpi.run)


def _add_check(sub) -> None:
    p = sub.add_parser(
        "check", help="verify that a schedule only sends on fibres a patch plan cables",
        description="Check a schedule (step or tree JSON, MSCCL XML, .npz) against a "
                    "patch-panel plan CSV: every send u -> w must ride a cabled fibre from "
                    "u to w (simplex in that direction, duplex either way), and every "
                    "k-fold multi-arc of the schedule's topology needs k fibres. Exit 0 when "
                    "it holds; otherwise exit 2 with the first offending send. After a "
                    "--diff, export the schedule with --relabel MAP.csv to check it against "
                    "the new plan.")
    p.add_argument("plan", metavar="PLAN.csv", help="patch-panel plan (export --what "
                                                    "patch-panel, or a diff's new plan)")
    p.add_argument("schedule", metavar="SCHEDULE", help="schedule file (.json, .xml, .npz)")
    p.add_argument("--diff", default=None, metavar="DIFF.csv",
                   help="first apply this diff (export --what patch-panel --diff) to the plan: "
                        "unplug its remove rows (each must be in the plan), plug its add rows")
    p.set_defaults(run=_run_check)


def _run_check(args) -> int:
    plan = read_plan(args.plan)
    if args.diff:
        plan = apply_diff(plan, args.diff)
    report = check(plan, read_sends(args.schedule))
    if report.note:
        print(f"check: note: {report.note}", file=sys.stderr)
    print(f"check: ok — {report.sends} sends on {report.pairs} node pairs ride the plan's "
          f"{report.fibres} fibre directions")
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
    _add_check(sub)
    _add_bench(sub)
    _add_catalog(sub)
    _add_sweep(sub)
    _add_run(sub)
    return parser


def _json(doc) -> str:
    """Strict JSON (no NaN or Infinity, which JSON parsers other than Python's refuse)."""
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        raise TopofinderError("the result holds a number that is not finite; check the "
                              "sizes, latency and bandwidth given") from None


class _ClosedStdout:
    """Standing in for a closed standard output: the first write is a one-line error."""

    def write(self, text: str) -> int:
        raise TopofinderError("standard output is closed; give an output file with -o")

    def flush(self) -> None:
        pass


def _terminate(signum, frame) -> None:
    """SIGTERM / SIGHUP end the run like Ctrl-C: workers stopped, temporary files removed."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    if sys.stdout is None:                       # started with stdout closed (`>&-`)
        sys.stdout = _ClosedStdout()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _terminate)
    try:
        return _main(argv)
    finally:
        parallel.stop_workers()


def _main(argv: list[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except TopofinderError as exc:
        _say(f"error: {exc}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader closed stdout (e.g. `| head`): stop quietly, no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        return 1
    except OSError as exc:                       # I/O the writers did not name themselves
        where = f" ({exc.filename})" if exc.filename else ""
        _say(f"error: {exc.strerror or exc}{where}")
        return EXIT_BAD_INPUT
    except UnicodeDecodeError:                   # a reader that did not name the file itself
        _say("error: an input file is not UTF-8 text")
        return EXIT_BAD_INPUT
    except MemoryError:
        _say("error: out of memory; try a smaller N or --jobs 1")
        return EXIT_BAD_INPUT


def _say(message: str) -> None:
    """One line on stderr (from rank 0 only under mpiexec; nothing if stderr is closed)."""
    if not is_quiet_rank() and sys.stderr is not None:
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        print(f"topofinder: {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
