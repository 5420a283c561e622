"""Executing a schedule file under MPI (`topofinder run`, ``python -m topofinder.run``)."""

from __future__ import annotations

import argparse
import os

from topofinder.compute.lazy import lazy_module
from topofinder.errors import TopofinderError
from topofinder.execute import options as _options

#: The executor (schedule readers, mpi4py), loaded when a schedule is run: the command line
#: builds `run`'s parser for every command.
_mpi = lazy_module("topofinder.execute.mpi")

#: What `topofinder run` does (its --help).
RUN_DESCRIPTION = _options.DESCRIPTION
#: Add the options of `topofinder run` (shared with ``python -m topofinder.run``) to a parser.
add_run_arguments = _options.add_arguments

__all__ = ["RUN_DESCRIPTION", "add_run_arguments", "run_schedule"]


def run_schedule(schedule: str | os.PathLike, **options) -> int:
    """Execute a schedule file under MPI (start the process with ``mpiexec -n N``) and check
    it against MPI's collective; rank 0 prints the report (``json=True``: as JSON).
    ``options`` as `topofinder run` (size, iters, warmup, dtype, alpha, bandwidth, pipeline,
    seed; see :data:`add_run_arguments`). Returns the exit status: 0 verified, 1 the result
    differs from MPI's, 2 bad input."""
    parser = argparse.ArgumentParser(add_help=False)
    add_run_arguments(parser)
    args = parser.parse_args([os.fspath(schedule)])
    unknown = set(options) - set(vars(args))
    if unknown:
        raise TopofinderError(f"run: unknown option(s) {', '.join(sorted(unknown))}")
    vars(args).update(options)
    return _mpi.run(args)
