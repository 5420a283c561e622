"""Long runs: sweeps over many (N, d) and the benchmark (executing a schedule under MPI is
:mod:`topofinder.api.run`; the process helpers :mod:`topofinder.api.session`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from topofinder.batch import bench as _bench
from topofinder.batch import sweep as _sweep
from topofinder.compute import parallel
from topofinder.errors import TopofinderError

#: Most runs per bench case (medians settle long before; more is a typo).
MAX_BENCH_REPEAT = 1000

__all__ = ["MAX_BENCH_REPEAT", "SweepResult", "bench", "sweep"]


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

