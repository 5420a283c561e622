"""Independent work in parallel (docs/performance.md): joblib with loky on the local cores by
default, or a Dask cluster when `use_dask(address)` was called. Progress goes to stderr from the
start, its clock ticking every second, and counts items as they finish in any order.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import Callable, Iterable

import joblib
from joblib.externals.loky import reusable_executor
from joblib.externals.loky.process_executor import TerminatedWorkerError
from tqdm import tqdm

from topofinder.errors import TopofinderError

#: The backend in use; ``deaths``: its exceptions for a worker that died (a Dask task whose
#: workers were killed, e.g. by the nanny's memory limit, too often: KilledWorker).
_BACKEND = {"name": "loky", "client": None, "deaths": ()}


def use_dask(address: str | None) -> None:
    """Run later parallel work on the Dask scheduler at ``address`` (a LocalCluster when None).
    Needs the optional extra: pip install 'topofinder[dask]'."""
    try:
        from dask.distributed import Client, KilledWorker
    except ImportError:
        raise TopofinderError("the dask backend needs dask[distributed]: "
                              "pip install 'topofinder[dask]'") from None
    try:
        client = Client(address) if address else Client(processes=True, n_workers=2)
    except OSError as exc:
        raise TopofinderError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    _BACKEND.update(name="dask", client=client, deaths=(KilledWorker,))


def use_loky() -> None:
    if _BACKEND["client"] is not None:
        _BACKEND["client"].close()
    _BACKEND.update(name="loky", client=None, deaths=())


def stop_workers() -> None:
    """Terminate this process's idle or busy loky workers now (they would otherwise linger for
    their idle timeout, or keep computing after an interrupted run)."""
    executor = reusable_executor._executor
    if executor is not None:
        executor.shutdown(wait=False, kill_workers=True)


def _die_with_parent(parent: int) -> None:
    """Worker initialiser (Linux): have the kernel send SIGTERM to this worker when the
    process ``parent`` that started it dies, even by SIGKILL, which no handler there can
    catch (prctl PR_SET_PDEATHSIG); exit at once if it died while this worker was starting.
    A no-op where prctl does not exist."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)                    # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _indexed(fn: Callable, i: int, *args):
    return i, fn(*args)


def _ticking(bar, stop: threading.Event) -> None:
    """Redraw ``bar`` every second so its elapsed time moves while a long item runs."""
    while not stop.wait(1.0):
        bar.refresh()


def _check_loky_environment() -> None:
    """loky reads LOKY_MAX_CPU_COUNT with int() inside the pool (a ValueError traceback);
    refuse a value it cannot read, in one line, before starting workers."""
    value = os.environ.get("LOKY_MAX_CPU_COUNT")
    if value is not None and _BACKEND["name"] == "loky":
        try:
            int(value)
        except ValueError:
            raise TopofinderError(f"LOKY_MAX_CPU_COUNT={ascii(value)[:40]} is not a whole "
                                  f"number of cores; unset it or pass --jobs 1") from None


def run_parallel(fn: Callable, items: Iterable, jobs: int | None = None,
                 progress: bool | Callable | None = None, label: str = "working",
                 on_result: Callable | None = None) -> list:
    """[fn(*item) for tuple items, fn(item) otherwise], in order, on ``jobs`` workers
    (None: all cores; 1: in this process). Locally never more workers than cores: each holds
    its own copy of the work's memory, and more would only contend for the same cores.
    ``progress``: True for a stderr bar, or a callable told (items done, items) as they end.
    ``on_result(i, result)``: called in this process as item i's result arrives (a Dask
    worker may run on another machine: what must land on this one's disk is written here)."""
    items = list(items)
    args = [it if isinstance(it, tuple) else (it,) for it in items]
    cores = os.cpu_count() or 1
    jobs = min(jobs or cores, cores) if _BACKEND["name"] == "loky" else (jobs or cores)
    notify = progress if callable(progress) else None
    bar = tqdm(total=len(args), desc=label, file=sys.stderr, leave=False,
               disable=not progress or notify is not None)
    done = [0]

    def tick(i: int, result) -> None:
        if on_result is not None:
            on_result(i, result)
        bar.update()
        done[0] += 1
        if notify is not None:
            notify(done[0], len(args))

    stop = threading.Event()
    if progress and notify is None:
        threading.Thread(target=_ticking, args=(bar, stop), daemon=True).start()
    try:
        if jobs == 1 or len(args) <= 1:
            out = []
            for i, a in enumerate(args):
                out.append(fn(*a))
                tick(i, out[-1])
            return out
        _check_loky_environment()
        extra = ({"initializer": _die_with_parent, "initargs": (os.getpid(),)}
                 if _BACKEND["name"] == "loky" else {})
        with joblib.parallel_config(backend=_BACKEND["name"], n_jobs=jobs, **extra):
            gen = joblib.Parallel(return_as="generator_unordered")(        # as they finish
                joblib.delayed(_indexed)(fn, i, *a) for i, a in enumerate(args))
            out = [None] * len(args)
            for i, result in gen:
                out[i] = result
                tick(i, result)
            return out
    except (MemoryError, TerminatedWorkerError, *_BACKEND["deaths"]):
        hint = ("give the Dask workers more memory (dask worker --memory-limit) or fewer "
                "processes per machine" if _BACKEND["name"] == "dask" else
                "run with fewer parallel jobs (--jobs 1) or on a larger machine")
        raise TopofinderError(f"{label}: a worker ran out of memory or was killed; {hint}") \
            from None
    finally:
        stop.set()
        bar.close()
