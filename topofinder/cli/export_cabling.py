"""`topofinder export EXPR --what patch-panel | cross-connects`: the cabling plan, or with
--diff the fibres to move from an old plan and the relabelling that keeps the most."""

from __future__ import annotations

import shlex
import sys

from topofinder import api
from topofinder.errors import TopofinderError


def add_options(p) -> None:
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
                        "physical_label) here (default with -o OUT.csv: OUT-mapping.csv; "
                        "with the diff on stdout it is written only when named here)")
    p.add_argument("--waves", type=int, default=None, metavar="W",
                   help="with --diff: split the moves into W waves that keep the fabric "
                        "strongly connected (the diff CSV gains a wave column; every wave's "
                        "scores on stderr; --alpha/--bandwidth/--size price them)")
    p.add_argument("--max-down", type=int, default=None, metavar="F",
                   help="with --diff: waves of at most F fibres unplugged at once (instead "
                        "of --waves)")
    p.add_argument("--wave", type=int, default=None, metavar="I",
                   help="with --diff and --waves/--max-down: export the fabric as cabled "
                        "after wave I (--what topology, patch-panel or schedule; node "
                        "numbers of the old plan)")
    p.add_argument("--diff-method", choices=["exact", "heuristic"], default="exact",
                   help="with --diff: exact (isomorphism test, then QAP search; default) or "
                        "heuristic (iterated linear assignment only)")


def run(args) -> int:
    """Patch-panel plan CSV, or with --diff the fibres to move (count on stderr); with
    --what cross-connects the configuration (or its changes) on a fixed layout."""
    target = sys.stdout if args.output in (None, "-") else args.output
    if args.what == "cross-connects" and args.format not in (None, "csv", "sonic-ocs",
                                                             "netconf"):
        raise TopofinderError(f"export: cross-connects format {args.format!r}; accepted are "
                              "csv, sonic-ocs, netconf")
    if args.what == "cross-connects" and args.format in ("sonic-ocs", "netconf"):
        api.ocs_tables(args.expr, args.format, old=args.diff, waves=args.waves,
                              max_down=args.max_down, wave=args.wave,
                              workload=api.Workload.from_strings(args.alpha, args.bandwidth,
                                                                 args.size),
                              cabling=args.cabling, panel_size=args.panel_size,
                              method=args.diff_method, undirected=args.undirected,
                              path=args.output or "-")
        return 0
    if args.what == "cross-connects":
        cc, diff = api.export_cross_connects(
            args.expr, args.panel_size, args.trunks, cabling=args.cabling, old=args.diff,
            method=args.diff_method, undirected=args.undirected)
        if diff is not None:
            _report_diff(args, diff)
        if args.layout:
            cc.layout.write_csv(args.layout)
        lay = cc.layout
        summary = (f"layout: {lay.panels} panel(s) of {lay.panel_size} ports, "
                   f"{lay.per_panel} nodes each, {sum(t for _, _, t in lay.trunks)} trunk "
                   f"fibres, at most {lay.ports_used} ports used per panel")
        if cc.removed is None:
            print(f"cross-connects: {len(cc.configuration.connects)}; {summary}",
                  file=sys.stderr)
        else:
            print(f"cross-connects: {len(cc.removed)} to remove, {len(cc.added)} to add; "
                  f"{summary}", file=sys.stderr)
        cc.write_csv(target)
        return 0
    if args.diff and args.wave is not None:
        out = wave_fabric(args)[1]
    elif args.diff and (args.waves is not None or args.max_down is not None):
        out = wave_plan(args, stats=True)
        _report_diff(args, out.diff)
        _report_waves(out)
    elif args.diff:
        out = api.diff_patch_panel(args.diff, args.expr, args.cabling, args.panel_size,
                                   method=args.diff_method, undirected=args.undirected)
        _report_diff(args, out)
    else:
        out = api.export_patch_panel(args.expr, args.cabling, args.panel_size,
                                     undirected=args.undirected)
    out.write_csv(target)
    return 0


def wave_plan(args, stats: bool):
    """The --waves / --max-down plan of ``export EXPR --diff OLD.csv``."""
    workload = api.Workload.from_strings(args.alpha, args.bandwidth, args.size)
    return api.wave_plan(args.diff, args.expr, args.waves, args.max_down, workload,
                         cabling=args.cabling, panel_size=args.panel_size,
                         method=args.diff_method, undirected=args.undirected, stats=stats)


def wave_fabric(args):
    """``--wave I``: the fabric as cabled after wave I (a Topology in the old plan's node
    numbers) and its plan."""
    plan = wave_plan(args, stats=False)
    if not 0 <= args.wave <= plan.waves:
        raise TopofinderError(f"export: --wave {args.wave}: the plan has waves 1..{plan.waves}"
                              " (0: as cabled before)")
    after = plan.plan_after(args.wave)
    return after.to_topology(f"wave {args.wave} of {args.expr}"), after


def _report_waves(plan) -> None:
    """One stderr line per wave: rows moved, ports in use, scores during and after it, the
    old fabric with this wave's fibres failed; then the worst and its bound."""
    def t(doc):
        return "disconnected" if doc.get("disconnects") else \
            f"T_L {doc['T_L']}, tau {doc['tau_exact']}, allreduce {doc['allreduce_s'] * 1e6:.1f} us"
    for s in plan.stats:
        worst = s.get("worst_single_failure")
        extra = "" if worst is None else (
            f"; worst single failure {worst['unit']} {worst['failure']}: "
            + ("disconnects" if worst["allreduce_s"] is None else
               f"allreduce {worst['allreduce_s'] * 1e6:.1f} us"))
        print(f"wave {s['wave']}: {s['unplugged']} unplugged, {s['plugged']} plugged, at most "
              f"{s['max_ports']} ports per node; during: {t(s['during'])}; after: "
              f"{t(s['after'])}; old fabric with this wave's fibres failed: "
              f"{t(s['old_with_wave_failed'])}{extra}", file=sys.stderr)
    worst = max(s["during"].get("allreduce_s", float("inf")) for s in plan.stats)
    failed = max(s["old_with_wave_failed"].get("allreduce_s", float("inf"))
                 for s in plan.stats)
    print(f"waves: worst allreduce while a wave is out {worst * 1e6:.1f} us (lower bound for "
          f"any wave plan {plan.lower_bound_s * 1e6:.1f} us; worst of the old fabric with a "
          f"wave's fibres failed {failed * 1e6:.1f} us)", file=sys.stderr)


def mapping_path(args) -> str | None:
    """Where a --diff writes its relabelling: --mapping, else OUT-mapping.csv beside a file
    -o; None (not written) when the diff goes to stdout (no -o, or -o -) and --mapping is
    not given. --mapping - next to a diff on stdout is refused (two documents on one stream)."""
    if args.mapping == "-" and args.diff and args.output in (None, "-"):
        raise TopofinderError("export: --mapping - and the diff both on stdout; give "
                              "--mapping FILE or -o FILE")
    if args.mapping is not None or not args.diff or args.output in (None, "-"):
        return args.mapping
    stem = args.output[:-4] if args.output.lower().endswith(".csv") else args.output
    return stem + "-mapping.csv"


def _report_diff(args, diff) -> None:
    """The diff's counts on stderr, and its relabelling written (to --mapping, or beside -o)."""
    kept = diff.new.num_rows - diff.added.shape[0]
    iso = {True: "isomorphic to the old cabling", False: "not isomorphic",
           None: "isomorphism not decided (install pynauty)"}[diff.isomorphic]
    print(f"patch-panel diff: {diff.moves} fibres to move ({diff.removed.shape[0]} "
          f"unplugged, {diff.added.shape[0]} plugged, {kept} kept); {iso}; relabelling "
          f"by {diff.method}", file=sys.stderr)
    mapping = mapping_path(args)
    if not mapping:
        print("relabelling not written (the diff went to stdout): give --mapping FILE to "
              "keep it", file=sys.stderr)
    else:
        diff.write_mapping(sys.stdout if mapping == "-" else mapping)
        print(f"relabelling written to {mapping}; export the schedule as cabled after "
              f"the diff with: topofinder export {shlex.quote(args.expr)} --what schedule "
              f"--relabel {shlex.quote(mapping)}", file=sys.stderr)
