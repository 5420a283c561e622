"""`mpiexec -n N topofinder run SCHEDULE.json`: execute a schedule under MPI and check it
against MPI's collective (:func:`topofinder.api.run_schedule`)."""

from __future__ import annotations

from topofinder import api


def add(sub) -> None:
    p = sub.add_parser("run", help="execute a schedule under MPI and check it against MPI's "
                                   "collective (mpiexec -n N topofinder run SCHEDULE.json)",
                       description=api.RUN_DESCRIPTION)
    api.add_run_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    options = {k: v for k, v in vars(args).items() if k not in ("command", "command_parser", "run", "schedule")}
    return api.run_schedule(args.schedule, **options)
