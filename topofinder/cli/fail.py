"""`topofinder fail EXPR`: degraded-mode scores of every single (or paired) fibre and node
failure, by automorphism orbits (:func:`topofinder.api.fail`), and with ``--repatch NODE``
the best bypass of a dead node (:func:`topofinder.api.bypass`)."""

from __future__ import annotations

import shlex
import sys

from topofinder import api
from topofinder.cli.common import add_workload, json_text
from topofinder.errors import TopofinderError

DESCRIPTION = (
    "Score the fabric left by every single fibre failure (a duplex cable, both directions, "
    "when the fabric is cabled duplex) and every single node failure (the collective then "
    "runs among the N-1 survivors): BFB T_L and tau on the degraded digraph, the "
    "reduce-scatter's on its transpose, ForestColl's tau_fc and the allreduce time, one "
    "failure per automorphism orbit (exact: every failure in an orbit scores the same). "
    "Prints the worst, median and best regression against the intact fabric (BFB on both) "
    "and the critical elements. --links 2 / --nodes 2: the worst pair, exhaustive by orbits "
    "up to --pair-budget candidates, sampled beyond (the output says which). --repatch "
    "NODE: the best re-patching of NODE's in-neighbours to its out-neighbours (exact over "
    "all d! matchings for d <= 6) and its patch-panel diff; with --spares S also which "
    "spare node replaces NODE with the fewest patch cords moved.")


def add(sub) -> None:
    p = sub.add_parser("fail", help="degraded-mode scores of every single fibre and node "
                                    "failure; bypass re-patching", description=DESCRIPTION)
    p.add_argument("expr", metavar="EXPR", help="topology expression or file path")
    p.add_argument("--links", type=int, default=1, metavar="K",
                   help="simultaneous fibre (cable) failures: 0, 1 (default) or 2")
    p.add_argument("--nodes", type=int, default=1, metavar="K",
                   help="simultaneous node failures: 0, 1 (default) or 2")
    p.add_argument("--cabling", choices=["auto", "simplex", "duplex"], default="auto",
                   help="what one fibre failure takes: auto (a duplex cable on bidirectional "
                        "fabrics, as export --what patch-panel cables them), simplex, duplex")
    p.add_argument("--alltoall", action="store_true",
                   help="also the all-to-all concurrent flow of every degraded fabric")
    p.add_argument("--pair-budget", type=int, default=api.PAIR_BUDGET, metavar="P",
                   help=f"K = 2: most pair candidates scored exhaustively (default "
                        f"{api.PAIR_BUDGET}); beyond, P of them are sampled")
    add_workload(p, " of the degraded prices")
    p.add_argument("--repatch", type=int, default=None, metavar="NODE",
                   help="plan the bypass of dead NODE instead of the survey")
    p.add_argument("-o", "--output", default=None, metavar="DIFF.csv",
                   help="--repatch: write the patch-panel diff (remove/add rows) here")
    p.add_argument("--spares", type=int, default=None, metavar="S",
                   help="--repatch: also pick which of S spare nodes (N..N+S-1 on the panel "
                        "layout of export --what cross-connects) replaces NODE with the "
                        "fewest patch cords moved")
    p.add_argument("--panel-size", type=int, default=1008, metavar="PORTS",
                   help="--repatch: ports per patch panel (default 1008)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(run=run)


def _workload(args) -> api.Workload:
    return api.Workload.from_strings(args.alpha, args.bandwidth, args.size)


def _progress(kind: str, done: int, total: int) -> None:
    if sys.stderr is not None and sys.stderr.isatty():
        print(f"\r\033[Kfail: {kind} {done}/{total}", end="" if done < total else "\n",
              file=sys.stderr, flush=True)


def run(args) -> int:
    if args.repatch is not None:
        return _run_repatch(args)
    if args.output:
        raise TopofinderError("fail: -o/--output applies to --repatch (the diff CSV)")
    doc = api.fail(args.expr, _workload(args), links=args.links, nodes=args.nodes,
                   cabling=args.cabling, alltoall=args.alltoall, pair_budget=args.pair_budget,
                   progress=_progress)
    print(json_text(doc) if args.json else "\n".join(format_survey(doc)))
    return 0


def _score(row: dict) -> str:
    if row.get("disconnects"):
        return "disconnects the fabric"
    reg = row.get("regression")
    return (f"T_L {row['T_L']}, tau {row['tau_exact']}, tau_fc {row['tau_fc_exact']}, "
            f"allreduce {row['allreduce_s'] * 1e6:.1f} us"
            + ("" if reg is None else f" (x{reg:.4f})"))


def format_survey(doc: dict) -> list[str]:
    """The text report of a `fail` document."""
    out = [f"fail {doc['expr']}: N = {doc['N']}, d = {doc['d']}, cabled {doc['cabling']}, "
           f"{doc['automorphisms']} automorphisms",
           f"  intact (BFB): {_score(doc['intact'])}"]
    for key in ("links", "nodes"):
        s = doc.get(f"single_{key}")
        if s:
            out.append(f"single {s['unit']} failures: {s['failures']} in {s['orbits']} orbits "
                       f"(exact by orbits), {s['disconnecting']} disconnect")
            for which in ("worst", "median", "best"):
                out.append(f"  {which:6} {s[which]['failure']:>12}: {_score(s[which])}")
            crit = s["critical"]
            out.append(f"  critical ({len(crit)}): {', '.join(crit[:12])}"
                       + (", ..." if len(crit) > 12 else ""))
        p = doc.get(f"pair_{key}")
        if p:
            out.append(f"worst {p['unit']}: {p['worst']['failure']}: {_score(p['worst'])}; "
                       f"{p['method']}; {p['disconnecting']} of {p['evaluated']} disconnect")
    return out


def _spread(spares: list[dict]) -> str:
    cords = [s["cords"] for s in spares if s["cords"] is not None]
    full = len(spares) - len(cords)
    return (f"{len(spares)} spares tried, {min(cords)}..{max(cords)} cords"
            + (f", {full} without trunk room" if full else ""))


def _run_repatch(args) -> int:
    doc, diff = api.bypass(args.expr, args.repatch, _workload(args), cabling=args.cabling,
                           panel_size=args.panel_size)
    spare = None
    if args.spares is not None:
        spare = api.spare(args.expr, args.repatch, args.spares, cabling=args.cabling,
                          panel_size=args.panel_size).as_dict()
        doc["spare"] = spare
    if args.output:
        diff.write_csv(args.output)
    if args.json:
        print(json_text(doc))
        return 0
    print(f"bypass of dead node {doc['node']}: patch {', '.join(doc['fibres'])} "
          f"({doc['method']}, {doc['evaluated']} distinct matchings scored)")
    for key in ("intact", "nothing", "repatched"):
        print(f"  {key:9}: {_score(doc[key])}")
    print(f"  fibre moves: {diff.removed.shape[0]} rows unplugged, {diff.added.shape[0]} "
          f"plugged" + (f", written to {args.output}" if args.output else ""))
    print(f"  schedule: topofinder export {shlex.quote(doc['expr'])} --what schedule "
          f"--collective allreduce")
    nothing, repatched = doc["nothing"].get("allreduce_s"), doc["repatched"].get("allreduce_s")
    if nothing is not None and repatched is not None and nothing < repatched:
        print("  note: under BFB doing nothing is faster here (the new fibres are shortcuts "
              "that shortest paths crowd); the re-patched fabric's tree schedule "
              "(--kind trees) reaches its tau_fc")
    if spare is not None:
        print(f"spare: node {spare['spare']} replaces node {spare['node']} (intact T_L and tau): "
              f"{spare['cords_unplugged']} patch cords unplugged, {spare['cords_plugged']} "
              f"plugged; " + _spread(spare["spares"]))
    return 0
