"""What every command shares: the one-line-error parser, the topology-file options, strict
JSON, aligned tables and the stderr progress lines."""

from __future__ import annotations

import argparse
import json
import sys
import time

from topofinder import api
from topofinder.errors import TopofinderError

#: Collectives with a root, whose platform need not be strongly connected (paper 003)
_ONE_ROOT = (api.Collective.BROADCAST, api.Collective.SCATTER, api.Collective.REDUCE,
             api.Collective.GATHER)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of usage dumps."""

    def error(self, message: str):  # noqa: D401 - argparse hook
        command = self.prog.removeprefix("topofinder").strip()   # main() says "topofinder:"
        raise TopofinderError(f"{command + ': ' if command else ''}{message} "
                              f"(see '{self.prog} --help')")


def add_undirected(p) -> None:
    p.add_argument("--undirected", action="store_const", const=True, default=None,
                   help="topology file: every line/edge is one undirected cable (two arcs), "
                        "as networkx.write_edgelist writes")
    p.add_argument("--directed", dest="undirected", action="store_const", const=False,
                   help="topology file: read every line/edge as one arc even when the file "
                        "looks like one line per cable")


def add_workload(p, of: str = "", where: str = "") -> None:
    """--alpha, --bandwidth and --size (api.Workload.from_strings), one spelling for every
    command that prices: ``of`` says what they price, ``where`` which outputs they apply to."""
    p.add_argument("--alpha", default="10us",
                   help=f"{where}per-step latency α{of} (default 10us)")
    p.add_argument("--bandwidth", default="100Gbps",
                   help=f"{where}node bandwidth B = d·b{of} (default 100Gbps; Gbps = 10^9 "
                        "bit/s)")
    p.add_argument("--size", default="1MB",
                   help=f"{where}collective size M{of} (KB/MB/GB = 1024-based bytes), or a "
                        "weighted list such as 1MB:0.7,64MB:0.3 (default 1MB)")


def source(args):
    """EXPR as given, or the topology read from a file with --undirected/--directed; for a
    one-root collective (``args.collective``, ``args.root``) read with what it needs of the
    platform (reachability from or to the root, not strong connectivity: paper 003)."""
    collective = getattr(args, "collective", None)
    if collective in _ONE_ROOT:
        return api.load(args.expr, args.undirected, collective=collective,
                        root=getattr(args, "root", 0) or 0)
    if args.undirected is None:
        return args.expr
    return api.load(args.expr, undirected=args.undirected)


def json_text(doc) -> str:
    """Strict JSON (no NaN or Infinity, which JSON parsers other than Python's refuse)."""
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        raise TopofinderError("the result holds a number that is not finite; check the "
                              "sizes, latency and bandwidth given") from None


def table(rows) -> list[str]:
    """Rows of strings as left-aligned columns two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def stderr_is_tty() -> bool:
    return sys.stderr is not None and sys.stderr.isatty()


def bracket_progress():
    """A stderr line following the all-to-all bracket: iteration, [lower, upper], gap, time."""
    start = time.perf_counter()

    def show(iteration, lower, upper):
        print(f"\rall-to-all bracket: iteration {iteration}, [{lower:.4e}, {upper:.4e}], gap "
              f"{(upper - lower) / upper:.2%}, {time.perf_counter() - start:.0f} s",
              end="", file=sys.stderr, flush=True)
    return show


def stage_progress():
    """A stderr line for a long scoring stage: items done, elapsed time and an ETA."""
    start: dict[str, float] = {}

    def show(stage, done, total):
        began = start.setdefault(stage, time.perf_counter())
        spent = time.perf_counter() - began
        eta = spent / done * (total - done) if done else float("nan")
        print(f"\r\033[Kscore: {stage} {done}/{total}, {spent:.0f} s, ETA {eta:.0f} s",
              end="", file=sys.stderr, flush=True)
    return show
