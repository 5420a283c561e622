"""Long runs and processes: sweeps over many (N, d), the benchmark, and executing a schedule
under MPI; the worker and rank helpers a front end needs."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from topofinder.batch import bench as _bench
from topofinder.batch import sweep as _sweep
from topofinder.compute import interrupt, memory, output, parallel
from topofinder.errors import TopofinderError
from topofinder.execute import is_quiet_rank
from topofinder.execute import mpi as _mpi

#: Most runs per bench case (medians settle long before; more is a typo).
MAX_BENCH_REPEAT = 1000
#: What `topofinder run` does (its --help).
RUN_DESCRIPTION = _mpi.DESCRIPTION
#: Add the options of `topofinder run` (shared with ``python -m topofinder.run``) to a parser.
add_run_arguments = _mpi.add_arguments
#: Stop this process's parallel workers now (after a run, or when interrupted).
stop_workers = parallel.stop_workers
#: Ctrl-C, SIGTERM and SIGHUP honoured within a second, even inside native solvers (a front
#: end's main thread calls it once).
install_interrupt_handlers = interrupt.install
#: Have this process reuse the memory it frees instead of faulting in fresh pages for every
#: large array (a front end's process, which it owns, calls it once; topofinder.compute.memory).
keep_freed_memory = memory.keep_freed_memory
#: Whether a signal has been honoured in this process (an error after it is its consequence).
was_interrupted = interrupt.interrupted
#: Context of one front-end command: its outputs may not replace its inputs or each other.
command_scope = output.command
#: Refuse, before anything is written, outputs that name one file twice, or one output path
#: that could not be written (an input, a directory, the command's own stdout).
distinct_outputs = output.distinct_outputs
check_output = output.checked_target
#: Record a path as an input of the current command (an output naming it is then refused).
note_input = output.note_input

__all__ = ["MAX_BENCH_REPEAT", "RUN_DESCRIPTION", "SweepResult", "add_run_arguments", "bench",
           "check_output", "command_scope", "distinct_outputs", "install_interrupt_handlers",
           "is_quiet_rank", "keep_freed_memory", "note_input", "run_schedule", "stop_workers",
           "sweep", "was_interrupted"]


@dataclass(frozen=True)
class SweepResult:
    """A sweep's ``name``, how many ``cells`` (N, d) its spec has, the folder ``out`` its
    files went to, and the cells that ``failed`` (N, d, error; listed in failed.csv)."""

    name: str
    cells: int
    out: Path
    failed: list[dict]


def sweep(spec: str | os.PathLike, out: str | os.PathLike | None = None, *,
          jobs: int | None = None, use_cache: bool = True, backend: str = "loky",
          scheduler: str | None = None) -> SweepResult:
    """Run the finder for every (N, d) of a TOML spec and write ``out``/<name>/ (default
    ./results): one file per cell (resumable), frontier.csv/.json, best.csv and plots.
    ``backend`` loky (local processes) or dask (``scheduler`` address; None: local)."""
    if jobs is not None and jobs < 1:
        raise TopofinderError(f"sweep: --jobs must be >= 1, got {jobs}")
    if backend not in ("loky", "dask"):
        raise TopofinderError(f"sweep: backend {backend!r}; accepted are loky, dask")
    if scheduler and backend != "dask":
        raise TopofinderError("sweep: --scheduler needs --backend dask")
    loaded = _sweep.load_spec(spec)
    if backend == "dask":
        parallel.use_dask(scheduler)
    try:
        folder, failed = _sweep.run_sweep(loaded, Path(out) if out else _sweep.RESULTS,
                                          jobs=jobs, use_cache=use_cache)
    finally:
        parallel.use_loky()
    return SweepResult(loaded.name, len(loaded.cells), folder, failed)


def bench(cases: list[str] | None = None, repeat: int | None = None,
          progress: Callable[[str], None] | None = None) -> dict:
    """Median timings of the benchmark cases whose names contain one of ``cases`` (all when
    None), ``repeat`` runs each (default: per case), merged into results/bench.json; the
    report has ``machine`` (cores, python) and ``cases`` (name, median_s, target_s,
    meets_target, failed)."""
    if repeat is not None and not 1 <= repeat <= MAX_BENCH_REPEAT:
        raise TopofinderError(f"bench: --repeat must be an integer in 1..{MAX_BENCH_REPEAT}")
    _bench.read()                                 # a bad results/bench.json fails before timing
    report = _bench.run(cases or None, repeat, progress=progress)
    if not report["cases"]:
        raise TopofinderError(f"bench: no case matches {' '.join(cases or [])}")
    _bench.write(report)
    return report


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
