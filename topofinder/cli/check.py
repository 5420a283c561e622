"""`topofinder check PLAN.csv SCHEDULE`: does a schedule only send on fibres the plan cables
(:func:`topofinder.api.check_schedule`)?"""

from __future__ import annotations

import sys

from topofinder import api


def add(sub) -> None:
    p = sub.add_parser(
        "check", help="verify that a schedule only sends on fibres a patch plan cables",
        description="""\
        Check a schedule (step or tree JSON, MSCCL XML, .npz) against a patch-panel plan CSV:
        every send u -> w must ride a cabled fibre from u to w (simplex in that direction,
        duplex either way), and every k-fold multi-arc of the schedule's topology needs k
        fibres. Exit 0 when it holds; otherwise exit 2 with the first offending send. After a
        --diff, export the schedule with --relabel MAP.csv to check it against the new plan.""")
    p.add_argument("plan", metavar="PLAN.csv", help="patch-panel plan (export --what "
                                                    "patch-panel, or a diff's new plan)")
    p.add_argument("schedule", metavar="SCHEDULE", nargs="+",
                   help="schedule file (.json, .xml, .npz), or a set of per-rank files "
                        "(export --rank/--ranks), checked together: every send between "
                        "their ranks must be the other file's receive")
    p.add_argument("--diff", default=None, metavar="DIFF.csv",
                   help="first apply this diff (export --what patch-panel --diff) to the plan: "
                        "unplug its remove rows (each must be in the plan), plug its add rows")
    p.set_defaults(run=run)


def run(args) -> int:
    if len(args.schedule) > 1 or api.is_rank_document(args.schedule[0]):
        report = api.check_rank_schedules(args.plan, args.schedule, args.diff)
    else:
        report = api.check_schedule(args.plan, args.schedule[0], args.diff)
    if report.note:
        print(f"check: note: {report.note}", file=sys.stderr)
    print(f"check: ok — {report.sends} sends on {report.pairs} node pairs ride the plan's "
          f"{report.fibres} fibre directions")
    return 0
