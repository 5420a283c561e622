"""`topofinder bench [WORD ...]`: median timings of the benchmark cases against their targets
(:func:`topofinder.api.bench`)."""

from __future__ import annotations

import sys

from topofinder import api
from topofinder.cli.common import json_text


def add(sub) -> None:
    p = sub.add_parser("bench", help="time the benchmark cases against their targets",
                       description="""\
        Median timings of the benchmark cases (building, BFB scoring, expansion schedules,
        ForestColl, all-to-all, search cold and warm, patch panels, catalog searches), each
        against its target, printed with the machine's core count and merged into
        results/bench.json.""")
    p.add_argument("cases", nargs="*", metavar="WORD",
                   help="run only cases whose name contains one of these words")
    p.add_argument("--repeat", type=int, default=None, help="runs per case (default: per case)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    report = api.bench(args.cases or None, args.repeat,
                       progress=lambda name: print(f"bench: {name} ...", file=sys.stderr))
    if args.json:
        print(json_text(report))
        return 0
    print(f"machine: {report['machine']['cores']} cores, Python {report['machine']['python']}")
    for row in report["cases"]:
        target = "" if row["target_s"] is None else f"  target {row['target_s']:g} s  " + (
            "ok" if row["meets_target"] else "MISSED")
        failed = f"  FAILED: {row['failed']}" if row.get("failed") else ""
        print(f"{row['median_s']:9.4f} s  {row['name']}{target}{failed}")
    return 0
