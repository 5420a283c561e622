"""`topofinder export EXPR --what ...`: a topology file, a rank file, a schedule
(:mod:`topofinder.cli.export_schedule`) or a patch-panel plan, diff or cross-connects
(:mod:`topofinder.cli.export_cabling`)."""

from __future__ import annotations

import os
import sys

from topofinder import api
from topofinder.cli import export_cabling, export_schedule
from topofinder.cli.common import add_undirected
from topofinder.errors import TopofinderError


def add(sub) -> None:
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
    p.add_argument("--format", default=None,
                   help="topology: edgelist (default), json (node-link), graphml; "
                        "schedule: json (default), mscclpp (MSCCL++ execution plan), xml "
                        "(MSCCL, the legacy runtime), npz (compact, needs -o), "
                        "chakra (ASTRA-sim: one Chakra ET per rank and the configuration "
                        "files, -o DIR); "
                        "cross-connects: csv (default), sonic-ocs (SONiC CONFIG_DB JSON), "
                        "netconf (Polatis-style edit-config XML, delete then create per wave); "
                        "ranks: csv (default), hostfile, rankfile (Open MPI), torchrun")
    export_schedule.add_options(p)
    export_cabling.add_options(p)
    p.add_argument("--relabel", default=None, metavar="MAP.csv",
                   help="topology, schedule, ranks: rename nodes by a diff's mapping, so the "
                        "export uses the numbering of the cables after the diff")
    add_undirected(p)
    p.add_argument("--fail", action="append", default=[], metavar="u->w",
                   help="export the degraded fabric: fibre u->w (or duplex cable u<->w) dead; "
                        "repeatable; intact node numbers")
    p.add_argument("--fail-node", action="append", type=int, default=[], metavar="U",
                   help="export the degraded fabric: node U dead (survivors renumbered, names "
                        "kept); repeatable")
    p.add_argument("-o", "--output", default=None, help="output file (default: stdout)")
    p.set_defaults(run=run)


def _check_outputs(args) -> None:
    """Refuse, before any work, outputs that name one file twice, an input (EXPR, --pick's
    result, --diff, --relabel) or a place that cannot be written."""
    outputs = (args.output, export_cabling.mapping_path(args), args.layout,
               wave_topology_path(args))
    api.distinct_outputs(*outputs)
    for path in (args.expr, args.diff, args.relabel):
        if path:
            api.note_input(path)
    for path in outputs:
        if path and path != "-" and not (path == args.output and args.format == "chakra"):
            api.check_output(path)


def wave_topology_path(args) -> str | None:
    """Where `--what schedule --wave I` writes the fabric its schedule runs on (the schedule
    document names it): OUT-waveI.edges beside -o."""
    if args.wave is None or args.what != "schedule":
        return None
    if args.output in (None, "-"):
        raise TopofinderError("export --what schedule --wave I: give -o FILE (the wave's "
                              "topology is written beside it as FILE-waveI.edges)")
    stem = os.path.splitext(args.output)[0]
    return f"{stem}-wave{args.wave}.edges"


def _wave_topology_file(args) -> str:
    path = wave_topology_path(args)
    api.export_topology(export_cabling.wave_fabric(args)[0], "edgelist", path)
    print(f"the fabric after wave {args.wave} written to {path} (the schedule names it)",
          file=sys.stderr)
    return path


def picked_expression(path: str, pick: int) -> str:
    """The expression of frontier point ``pick`` of a `search --json` result file."""
    not_a_result = f"export --pick: {path} is not a 'topofinder search --json' result"
    try:
        frontier = api.search_frontier(path, f"export --pick: {path}")
    except TopofinderError as exc:
        if "not valid JSON" in str(exc) or "not a usable JSON" in str(exc):
            raise TopofinderError(not_a_result) from None
        raise
    if not 0 <= pick < len(frontier):
        raise TopofinderError(f"export --pick {pick}: {path} has frontier points "
                              f"0..{len(frontier) - 1}")
    point = frontier[pick]
    if not isinstance(point, dict) or not isinstance(point.get("expr"), str):
        raise TopofinderError(f"{not_a_result} (frontier point {pick} has no 'expr' string)")
    return api.topology_of_document(point["expr"], f"{path} frontier point {pick}").expr


def run(args) -> int:
    _check_outputs(args)
    if args.pick is not None:
        args.expr = picked_expression(args.expr, args.pick)
    if args.fail or args.fail_node:
        if args.undirected is not None:
            raise TopofinderError("export: --fail/--fail-node apply to expressions, not to "
                                  "--undirected/--directed files")
        args.expr = api.failed(args.expr, args.fail, args.fail_node)
    if args.relabel and args.what == "patch-panel":
        raise TopofinderError("export: --relabel applies to topology, schedule and ranks; a "
                              "diff's patch plan is already in the old plan's numbering")
    if (args.mapping or args.diff_method != "exact") and not args.diff:
        raise TopofinderError("export: --mapping and --diff-method need --diff OLD.csv")
    waved = args.waves is not None or args.max_down is not None
    if (waved or args.wave is not None) and not args.diff:
        raise TopofinderError("export: --waves, --max-down and --wave need --diff OLD.csv")
    if args.wave is not None and not waved:
        raise TopofinderError("export: --wave I needs the plan's --waves W or --max-down F")
    if (waved or args.wave is not None) and args.what == "cross-connects" \
            and args.format not in ("sonic-ocs", "netconf"):
        raise TopofinderError("export: --waves/--wave with cross-connects need --format "
                              "sonic-ocs or netconf")
    if args.wave is not None and args.what == "ranks":
        raise TopofinderError("export: --wave applies to topology, patch-panel and schedule")
    if args.wave is not None and args.what == "topology":
        args.expr = export_cabling.wave_fabric(args)[0]
    if args.wave is not None and args.what == "schedule":
        args.expr = _wave_topology_file(args)
    renaming = api.mapping(args.relabel) if args.relabel else None
    if args.what in ("patch-panel", "cross-connects"):
        return export_cabling.run(args)
    if args.what == "schedule":
        return export_schedule.run(args, renaming)
    write = api.export_ranks if args.what == "ranks" else api.export_topology
    write(args.expr, args.format or ("csv" if args.what == "ranks" else "edgelist"),
          args.output or "-", undirected=args.undirected, relabel=renaming)
    return 0
