"""`topofinder catalog list | build | affine`: the base-topology catalog
(:func:`topofinder.api.catalog_list`, :func:`~topofinder.api.catalog_build`,
:func:`~topofinder.api.catalog_affine`)."""

from __future__ import annotations

import sys

from topofinder import api
from topofinder.cli.common import Parser, json_text


def add(sub) -> None:
    p = sub.add_parser("catalog", help="list (or build) the base-topology catalog",
                       description="""\
        The catalog of small base topologies (complete, bipartite, Hamming, rings,
        search-found bases such as Diamond and DBJMod) with their stored allgather schedules
        and how each was found; the finder expands them.""")
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    lst = actions.add_parser("list", help="N, d, T_L, tau, BW-/Moore-optimal flags, provenance")
    lst.add_argument("--json", action="store_true", help="print one JSON document")
    lst.set_defaults(run=run_list)
    _add_build(actions)
    _add_affine(actions)


def _add_build(actions) -> None:
    build = actions.add_parser(
        "build", help="exhaustive searches that find catalog bases",
        description="""\
        Enumerate small d-regular digraphs up to isomorphism (all of them, or the rewirings of
        a de Bruijn graph), order them by BFB tau and search a STEPS-step schedule with CHUNKS
        chunks per shard by CP-SAT; the first base whose schedule reaches the target tau
        (default BW-optimal) is written to catalog/ with the command that produced it.
        Presets: """ + ", ".join(api.CATALOG_PRESETS) + ".")
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
    build.set_defaults(run=run_build)


def _add_affine(actions) -> None:
    aff = actions.add_parser(
        "affine", help="search affine digraphs Aff(N,q,{a,...}) for every N (bases)",
        description="""\
        For every N in N_MIN..N_MAX and each degree, draw TRIES seeded affine digraphs x ->
        q*x + a mod N (loops rewired into a cycle), keep those with diameter <= that of
        Pi(d,N) + 2, score each by BFB and store the Pareto set in (diameter, tau) in
        catalog/affine.json, which the finder reads as bases (nothing is searched during
        `search`).""")
    aff.add_argument("--d", type=int, nargs="+", default=[4], help="degrees (default 4)")
    aff.add_argument("--n-min", type=int, default=5, help="smallest N (default 5)")
    aff.add_argument("--n-max", type=int, default=2000, help="largest N (default 2000)")
    aff.add_argument("--tries", type=int, default=api.AFFINE_TRIES,
                     help=f"draws per (N, d) (default {api.AFFINE_TRIES})")
    aff.add_argument("--seed", type=int, default=api.AFFINE_SEED,
                     help=f"seed of the draws (default {api.AFFINE_SEED})")
    aff.add_argument("--jobs", type=int, default=None, help="worker processes (default: all)")
    aff.add_argument("-o", "--output", default=None,
                     help="catalog file to write (default: the shipped catalog/affine.json)")
    aff.set_defaults(run=run_affine)


def run_affine(args) -> int:
    doc, path = api.catalog_affine(args.d, args.n_min, args.n_max, args.output,
                                   tries=args.tries, seed=args.seed, jobs=args.jobs)
    built = [doc["degrees"][str(d)] for d in args.d]
    count = sum(len(b["entries"]) for b in built)
    print(f"catalog affine: {count} (N, d) with entries, {built[0]['provenance']['seconds']} s; "
          f"wrote {path}")
    return 0


def run_list(args) -> int:
    rows = api.catalog_list()
    if args.json:
        print(json_text({"entries": rows}))
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


def run_build(args) -> int:
    def progress(row):
        if not args.json:
            print(f"  {row['candidate']}: diameter {row['diameter']}, BFB tau "
                  f"{row['tau_bfb']}, CP-SAT {row['status']} tau {row['tau']} "
                  f"({row['seconds']:.2f} s)", file=sys.stderr)

    reports = api.catalog_build(
        args.names, name=args.name, write=not args.no_write, target=args.target,
        progress=progress, done=None if args.json else lambda r: print(_summary(r)),
        space=args.space, n=args.n, d=args.d, steps=args.steps,
        chunks=args.chunks, reverse_symmetric=args.reverse_symmetric,
        time_limit=args.time_limit, budget=args.budget, search_all=args.search_all)
    if args.json:
        print(json_text({"builds": reports}))
    return 0 if all(r["found"] for r in reports) else 1


def _summary(report: dict) -> str:
    found = (f"T_L {report['T_L']}, tau {report['tau']}"
             f"{' (BW-optimal)' if report['bw_optimal'] else ''}" if report["found"] else
             "nothing to store: BFB already reaches the target on every candidate"
             if report["candidates"] and report["skipped_bfb_optimal"] == report["candidates"]
             else "no schedule found")
    return (f"{report['name'] or 'search'}: {found}; {report['candidates']} candidates, "
            f"{report['skipped_bfb_optimal']} BFB-optimal skipped, "
            f"{len(report['searches'])} CP-SAT searches, {report['seconds']:.1f} s"
            f"{'; wrote ' + report['path'] if report['path'] else ''}")
