"""`topofinder score EXPR`: every score of one topology (:func:`topofinder.api.score`)."""

from __future__ import annotations

import sys

from topofinder import api
from topofinder.cli.common import (
    add_undirected, add_workload, bracket_progress, json_text, source, stage_progress, stderr_is_tty,
)
from topofinder.api import Collective


def add(sub) -> None:
    p = sub.add_parser("score", help="score one topology: N, d, diameter, T_L, tau, tau_fc, ...",
                       description="""\
        Score one topology given as an expression (e.g. 'L^3(C(16,{3,4}))', 'Pi(4,1024)',
        'Torus(8,8)') or a topology file (edge list, node-link JSON, GraphML): N, degree d,
        diameter; the optimal breadth-first-broadcast (BFB) allgather schedule's steps T_L and
        bandwidth time tau in units of M/B (exact fractions in *_exact); the bounds (Moore
        bound on steps, (N-1)/N on tau); tau_fc, the best tau any tree schedule reaches
        (ForestColl); the all-to-all concurrent flow f per unit link capacity with its
        certified upper bound; and, when the expression names a construction other than BFB
        (line graph, catalog schedule, ...), that schedule's own T_L and tau. For the
        workload (--size, --alpha, --bandwidth) the allgather, reduce-scatter and allreduce
        schedules `export` writes are priced twice: *_time_s lock-step (T_L*alpha +
        tau*M/B) and *_async_s dependency-driven (each send starts when its data has arrived
        and its link is free; docs/model.md).""")
    p.add_argument("expr", metavar="EXPR", help="topology expression or file path")
    add_undirected(p)
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
    add_workload(p, " of the prices")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    _add_oneroot(p)
    p.set_defaults(run=run)


def _add_oneroot(p) -> None:
    g = p.add_argument_group("one-root collectives in steady state (docs/algorithms.md)")
    g.add_argument("--collective", choices=[Collective.BROADCAST, Collective.REDUCE,
                                        Collective.SCATTER, Collective.GATHER],
                   default=None,
                   help="instead of the allgather scores: the exact steady-state throughput "
                        "TP (unit messages per unit time; a unit message takes 1/C on a link "
                        "of capacity C) of this one-root collective, with its certificate, and "
                        "for broadcast/reduce the best single tree and best DAG next to it")
    g.add_argument("--port-model", choices=["one", "multi", "node"], default="one",
                   help="one: a node sends to one and receives from one neighbour at a time "
                        "(default); multi: every link independent; node: a node's sends (and "
                        "its receives) total at most --node-bandwidth")
    g.add_argument("--root", type=int, default=0, metavar="R", help="root node (default 0)")
    g.add_argument("--node-bandwidth", metavar="B", help="per-node send and receive cap in "
                   "units of b (a fraction is fine), with --port-model node; default: the "
                   "node_bandwidth the topology file states (docs/formats.md)")
    g.add_argument("--schedule", metavar="FILE", help="broadcast/reduce: also write the "
                   "replayed periodic schedule JSON (docs/formats.md)")


def _run_oneroot(args) -> int:
    options = {"root": args.root, "port_model": args.port_model,
               "node_bandwidth": args.node_bandwidth}
    # read once (a pipe such as <(cat f.edges) cannot be read twice), checked for what the
    # collective needs: reachability from (to) the root, not strong connectivity
    topo = api.load(args.expr, args.undirected, collective=args.collective, root=args.root)
    bar = _RoundsBar() if stderr_is_tty() else None
    info = api.score_oneroot(topo, args.collective, progress=bar and bar.show, **options)
    if bar:
        bar.close()
    periodic = None
    if args.schedule:
        periodic = api.schedule_oneroot(topo, args.collective, path=args.schedule, **options)
        info["schedule"] = args.schedule
    if args.collective == Collective.BROADCAST and args.port_model == "one":
        info.update(_broadcast_prices(topo, args, periodic))
    if args.json:
        print(json_text(info))
        return 0
    cert = info.pop("certificate")
    info["certificate"] = cert["kind"] + (f", primal {cert['primal']}" if "primal" in cert
                                          else "") + (f", {len(cert['cuts'])} cuts"
                                                      if "cuts" in cert else "")
    _print_table(info)
    return 0


def _broadcast_prices(topo, args, periodic=None) -> dict:
    """Both prices of the step program `export --collective broadcast --root R` writes (the
    one-port periodic schedule, ``periodic`` when --schedule already solved it, run for its
    default batches; api.broadcast_price) for the workload options."""
    workload = api.Workload.from_strings(args.alpha, args.bandwidth, args.size)
    _, steps = api.broadcast_program(topo, root=args.root, periodic=periodic)
    price = api.broadcast_price(steps, workload)
    return {"broadcast_T_L": price["T_L"], "broadcast_time_s": price["time_s"],
            "broadcast_async_s": price["async_s"]}


class _RoundsBar:
    """tqdm on stderr over cut-generation rounds: the bound and the cuts still violated;
    elapsed time and rate, no ETA (the number of rounds is not known in advance)."""

    def __init__(self):
        self.bar = None

    def show(self, rnd, bound, violated):
        from tqdm import tqdm
        if self.bar is None:
            self.bar = tqdm(desc="cut generation", unit="round", file=sys.stderr, leave=False)
        self.bar.set_postfix_str(f"bound {bound:.6g}, {violated} cuts violated")
        self.bar.update(rnd - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _print_table(info: dict) -> None:
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")


def run(args) -> int:
    if args.collective is not None:
        return _run_oneroot(args)
    if args.node_bandwidth is not None or args.schedule is not None:
        raise api.TopofinderError("score: --node-bandwidth and --schedule need --collective")
    workload = api.Workload.from_strings(args.alpha, args.bandwidth, args.size)
    tty = stderr_is_tty()
    info = api.score(source(args), alltoall=args.alltoall, alltoall_gap=args.alltoall_gap,
                     progress=bracket_progress() if tty else None,
                     stages=stage_progress() if tty else None,
                     fc_time_limit=args.fc_time_limit)
    info.update(api.collective_prices(source(args), workload))
    if tty:
        print("\r\033[K", end="", file=sys.stderr)
    if args.json:
        print(json_text(info))
    else:
        _print_table(info)
    return 0
