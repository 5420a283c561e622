"""Independent work in parallel (docs/performance.md): loky worker processes on the local
cores by default, or a Dask cluster (through joblib) when `use_dask(address)` was called.
Progress goes to stderr from the start, its clock ticking every second, and counts items as
they finish in any order.

A fresh worker spends about a second importing the stack before its first item. For work of a
few seconds (a cold `search --n 1024 --d 4`), ``run_parallel(..., share=True)`` has this
process work through the items itself while the workers start, and hands items to a worker
only once it is ready (``prestart`` starts them early, in the background).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Callable, Iterable

import joblib
from joblib.externals.loky import reusable_executor
from joblib.externals.loky.process_executor import TerminatedWorkerError
from tqdm import tqdm

from topofinder.compute.memory import keep_freed_memory
from topofinder.errors import TopofinderError

_BACKEND = {"name": "loky", "client": None}


def use_dask(address: str | None) -> None:
    """Run later parallel work on the Dask scheduler at ``address`` (a LocalCluster when None).
    Needs the optional extra: pip install 'topofinder[dask]'."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise TopofinderError("the dask backend needs dask[distributed]: "
                              "pip install 'topofinder[dask]'") from None
    try:
        client = Client(address) if address else Client(processes=True, n_workers=2)
    except OSError as exc:
        raise TopofinderError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    _BACKEND.update(name="dask", client=client)


def use_loky() -> None:
    if _BACKEND["client"] is not None:
        _BACKEND["client"].close()
    _BACKEND.update(name="loky", client=None)


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


#: Idle loky workers exit after this many seconds (joblib's default).
IDLE_WORKER_SECONDS = 300
#: Workers run native code single-threaded: the cores are already one worker each.
_WORKER_ENV = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                      "MKL_NUM_THREADS")}
#: In a worker: True (its own run_parallel calls run in-process). ``warm``: the executor and
#: the warm-up futures of its workers (prestart).
_STATE = {"in_worker": False, "warm": None}


def _start_worker(parent: int) -> None:
    """Loky worker initialiser: mark the process a worker, reuse freed memory like the
    command line (topofinder.compute.memory), and die with ``parent``."""
    _STATE["in_worker"] = True
    keep_freed_memory()
    _die_with_parent(parent)


def _executor():
    """This process's loky executor: always one worker per core (each call asks the same, so
    loky reuses it instead of restarting it); how many work at once is decided by what is
    handed to them."""
    return reusable_executor.get_reusable_executor(
        max_workers=os.cpu_count() or 1, timeout=IDLE_WORKER_SECONDS,
        initializer=_start_worker, initargs=(os.getpid(),), env=_WORKER_ENV)


def _ready(fn: Callable) -> int:
    """A worker's warm-up: unpickling ``fn`` has imported its modules."""
    return os.getpid()


def _workers(jobs: int | None) -> int:
    """Local worker processes for ``jobs`` (None: all cores), never more than the cores; 0
    inside a worker or on the Dask backend."""
    if _STATE["in_worker"] or _BACKEND["name"] != "loky":
        return 0
    cores = os.cpu_count() or 1
    return min(jobs or cores, cores)


def prestart(fn: Callable, jobs: int | None) -> None:
    """Start, in the background, the workers a later ``run_parallel(fn, ..., jobs=jobs,
    share=True)`` can use (jobs − 1 beside this process) and have each import ``fn``'s
    modules, so they are ready when the work is. A no-op for one job, inside a worker and on
    the Dask backend."""
    helpers = _workers(jobs) - 1
    if helpers < 1:
        return
    executor = _executor()
    if _STATE["warm"] is None or _STATE["warm"][0] is not executor:
        _STATE["warm"] = (executor, [])
    warm = _STATE["warm"][1]
    while len(warm) < helpers:
        warm.append(executor.submit(_ready, fn))


def _indexed(fn: Callable, i: int, *args):
    return i, fn(*args)


def _ticking(bar, stop: threading.Event) -> None:
    """Redraw ``bar`` every second so its elapsed time moves while a long item runs."""
    while not stop.wait(1.0):
        bar.refresh()


class _Feed:
    """Items handed to loky workers, at most ``workers`` at a time (only to warmed-up workers
    when ``ready`` is given), from the back of ``pending``; results stored as they arrive."""

    def __init__(self, fn, args, pending: deque, out: list, workers: int, tick, lock,
                 ready: list | None = None):
        self.fn, self.args, self.pending, self.out = fn, args, pending, out
        self.workers, self.tick, self.lock, self.ready = workers, tick, lock, ready
        self.executor = _executor()
        self.failure: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        flying: set = set()
        while not self.stop.is_set():
            allowed = self.workers if self.ready is None else \
                min(self.workers, sum(f.done() for f in self.ready))
            with self.lock:
                while len(flying) < allowed and self.pending:
                    i = self.pending.pop()
                    flying.add(self.executor.submit(_indexed, self.fn, i, *self.args[i]))
                if not flying and not self.pending:
                    return
            waiting = flying or [f for f in self.ready if not f.done()]
            done, _ = wait(waiting, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done & flying:
                flying.discard(future)
                try:
                    i, result = future.result()
                except BaseException as exc:                # re-raised in the calling thread
                    self.failure.append(exc)
                    return
                self.out[i] = result
                self.tick()


def _run_loky(fn, args, workers: int, tick, share: bool) -> list:
    """run_parallel on the local loky workers; with ``share`` this process takes items from
    the front while warmed-up workers take them from the back."""
    out: list = [None] * len(args)
    pending = deque(range(len(args)))
    lock = threading.RLock()
    if not share:
        feed = _Feed(fn, args, pending, out, workers, tick, lock)
        feed.run()
    else:
        prestart(fn, workers)
        feed = _Feed(fn, args, pending, out, workers - 1, tick, lock, _STATE["warm"][1])
        thread = threading.Thread(target=feed.run, daemon=True)
        thread.start()
        try:
            while not feed.failure:
                with lock:
                    if not pending:
                        break
                    i = pending.popleft()
                out[i] = fn(*args[i])
                tick()
            while thread.is_alive():
                thread.join(0.2)                 # short waits: signals are handled between
        finally:
            feed.stop.set()
    if feed.failure:
        raise feed.failure[0]
    return out


def run_parallel(fn: Callable, items: Iterable, jobs: int | None = None,
                 progress: bool | Callable | None = None, label: str = "working",
                 share: bool = False) -> list:
    """[fn(*item) for tuple items, fn(item) otherwise], in order, on ``jobs`` workers
    (None: all cores; 1: in this process). Locally never more workers than cores: each holds
    its own copy of the work's memory, and more would only contend for the same cores.
    ``share``: this process is one of the ``jobs`` and starts on the items at once, the
    others join as their workers finish importing (short work: module docstring).
    ``progress``: True for a stderr bar, or a callable told (items done, items) as they end."""
    items = list(items)
    args = [it if isinstance(it, tuple) else (it,) for it in items]
    local = _workers(jobs)
    notify = progress if callable(progress) else None
    bar = tqdm(total=len(args), desc=label, file=sys.stderr, leave=False,
               disable=not progress or notify is not None)
    done = [0]
    lock = threading.Lock()

    def tick() -> None:
        with lock:
            bar.update()
            done[0] += 1
            if notify is not None:
                notify(done[0], len(args))

    stop = threading.Event()
    if progress and notify is None:
        threading.Thread(target=_ticking, args=(bar, stop), daemon=True).start()
    try:
        if len(args) <= 1 or jobs == 1 or (_BACKEND["name"] == "loky" and local <= 1):
            out = []
            for a in args:
                out.append(fn(*a))
                tick()
            return out
        if _BACKEND["name"] == "loky":
            return _run_loky(fn, args, local, tick, share)
        with joblib.parallel_config(backend=_BACKEND["name"], n_jobs=jobs or os.cpu_count()):
            gen = joblib.Parallel(return_as="generator")(
                joblib.delayed(_indexed)(fn, i, *a) for i, a in enumerate(args))
            out = [None] * len(args)
            for i, result in gen:
                out[i] = result
                tick()
            return out
    except (MemoryError, TerminatedWorkerError):
        raise TopofinderError(f"{label}: a worker ran out of memory or was killed; run with "
                              f"fewer parallel jobs (--jobs 1) or on a larger machine") from None
    finally:
        stop.set()
        bar.close()
