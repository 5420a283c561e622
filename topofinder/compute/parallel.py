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
import warnings
from collections import deque
from concurrent.futures import FIRST_COMPLETED, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable, Sequence

import cloudpickle
from tqdm import tqdm

from topofinder.compute.memory import keep_freed_memory, release_freed_memory
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
    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = None if reusable is None else reusable._executor
    if executor is not None:
        executor.shutdown(wait=False, kill_workers=True)
    helpers, _STATE["helpers"] = _STATE["helpers"], None
    if helpers is not None:
        _kill(helpers.executor)


def _kill(executor) -> None:
    """Shut ``executor`` down now, its workers terminated (loky's or the standard library's)."""
    if _is_loky(executor):
        executor.shutdown(wait=False, kill_workers=True)
        return
    for process in list((executor._processes or {}).values()):
        process.terminate()
    executor.shutdown(wait=False, cancel_futures=True)


def _is_loky(executor) -> bool:
    """Whether ``executor`` is loky's (joblib, 0.06–0.15 s to import, is loaded only when a
    loky pool or the Dask backend is used: a search's forked helpers need neither)."""
    loky = sys.modules.get("joblib.externals.loky")
    return loky is not None and isinstance(executor, loky.ProcessPoolExecutor)


def _loky_deaths() -> tuple:
    """loky's exception for a worker that died, when loky is loaded (none ran otherwise)."""
    loky = sys.modules.get("joblib.externals.loky.process_executor")
    return () if loky is None else (loky.TerminatedWorkerError,)


def _usable(executor) -> bool:
    if _is_loky(executor):
        return not (executor._flags.broken or executor._flags.shutdown)
    return not (executor._broken or executor._shutdown_thread)


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
#: ``in_worker``: True in a worker (its own run_parallel calls run in-process). ``helpers``:
#: the warmed-up workers shared batches hand items to (prestart).
_STATE = {"in_worker": False, "helpers": None}


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
    from joblib.externals.loky import reusable_executor

    return reusable_executor.get_reusable_executor(
        max_workers=os.cpu_count() or 1, timeout=IDLE_WORKER_SECONDS,
        initializer=_start_worker, initargs=(os.getpid(),), env=_WORKER_ENV)


def _helper_executor(count: int):
    """An executor of exactly ``count`` workers for shared batches (loky starts every worker
    of an executor at once: a reusable one of a worker per core would import the stack in a
    process that shared work never uses, on the core this process computes on). On Linux,
    when no thread but the interrupt watchdog runs, the workers are forks of this process
    (`_forked_executor`): they start with every module it has imported instead of spending
    about a second importing them again — a cold `search --n 1024 --d 4` is that much
    shorter, its baselines starting at once."""
    if _can_fork():
        return _forked_executor(count)
    from joblib.externals.loky import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=count, timeout=IDLE_WORKER_SECONDS,
                               initializer=_start_worker, initargs=(os.getpid(),),
                               env=_WORKER_ENV)


#: Threads that may run when this process forks: they hold no lock a child could inherit
#: held (the interrupt watchdog blocks in a read of its pipe).
_FORK_SAFE_THREADS = frozenset({"topofinder-signals"})


def _can_fork() -> bool:
    return sys.platform == "linux" and all(
        t is threading.main_thread() or t.name in _FORK_SAFE_THREADS
        for t in threading.enumerate())


def _forked_executor(count: int):
    """The standard library's process pool with the fork start method: it forks all its
    workers at the first submit, before it starts a thread of its own (it does not spawn
    forked workers later), so the only threads at the fork are those `_can_fork` allows."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor as ForkPool

    executor = ForkPool(max_workers=count, mp_context=multiprocessing.get_context("fork"),
                        initializer=_start_forked, initargs=(os.getpid(),))
    with warnings.catch_warnings():      # Python ≥ 3.12 warns of any thread; see above
        warnings.filterwarnings("ignore", message=".*multi-threaded.*fork",
                                category=DeprecationWarning)
        executor.submit(os.getpid).result()
    return executor


def _start_forked(parent: int) -> None:
    """Initialiser of a forked worker: the signal handling this process installed (the
    watchdog's wake-up pipe is shared with it) reset to a worker's — the parent stops its
    workers on Ctrl-C, SIGTERM ends one, as it does a loky worker —, loky's single-thread
    environment for native libraries first loaded after the fork (those loaded before keep
    the thread pools they started with), then `_start_worker`."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    for name, value in _WORKER_ENV.items():
        os.environ[name] = value
    _start_worker(parent)


class _Portable:
    """A callable that travels to a worker by cloudpickle (a lambda, a closure, a function
    replaced at run time), as loky sends it, also through the standard library's pool of
    forked workers, which pickles by reference only."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)

    def __reduce__(self):
        return _Portable._load, (cloudpickle.dumps(self.fn),)

    @staticmethod
    def _load(data: bytes) -> "_Portable":
        return _Portable(cloudpickle.loads(data))


def _ready(fn: Callable) -> int:
    """A worker's warm-up: unpickling ``fn`` has imported its modules."""
    return os.getpid()


class _Helpers:
    """Workers started beside this process: one free slot per worker whose warm-up has ended,
    taken while an item of a shared batch runs there, so an item never waits in the queue of
    a worker that is still importing."""

    def __init__(self, executor):
        self.executor, self.warm, self.free = executor, [], 0
        self.cond = threading.Condition()

    def add(self, fn: Callable) -> None:
        future = self.executor.submit(_ready, _Portable(fn))
        self.warm.append(future)
        future.add_done_callback(self.give)

    def give(self, _future=None) -> None:
        with self.cond:
            self.free += 1
            self.cond.notify_all()

    def take(self, timeout: float) -> bool:
        with self.cond:
            if not self.free:
                self.cond.wait(timeout)
            if not self.free:
                return False
            self.free -= 1
            return True


def _workers(jobs: int | None) -> int:
    """Local worker processes for ``jobs`` (None: all cores), never more than the cores; 0
    inside a worker or on the Dask backend."""
    if _STATE["in_worker"] or _BACKEND["name"] != "loky":
        return 0
    cores = os.cpu_count() or 1
    return min(jobs or cores, cores)


def prestart(fn: Callable, jobs: int | None) -> None:
    """Start, in the background, the workers a later shared batch (``begin``, or
    ``run_parallel(fn, ..., jobs=jobs, share=True)``) can use — jobs − 1 beside this
    process — and have each import ``fn``'s modules, so they are ready when the work is. A
    no-op for one job, inside a worker and on the Dask backend."""
    count = _workers(jobs) - 1
    if count < 1:
        return
    helpers = _STATE["helpers"]
    if helpers is None or not _usable(helpers.executor):
        helpers = _STATE["helpers"] = _Helpers(_helper_executor(count))
    while len(helpers.warm) < min(count, helpers.executor._max_workers):
        helpers.add(fn)


def _indexed(fn: Callable, i: int, *args):
    """(i, fn(*args)); in a worker, the memory the item freed goes back to the system before
    its next one (release_freed_memory: else loky would restart the worker)."""
    try:
        return i, fn(*args)
    finally:
        if _STATE["in_worker"]:
            release_freed_memory()


def _ticking(bar, stop: threading.Event) -> None:
    """Redraw ``bar`` every second so its elapsed time moves while a long item runs."""
    while not stop.wait(1.0):
        bar.refresh()


#: A gate's verdicts on an item (run_parallel's ``gate``): run it now; skip it (its result is
#: None); or run it only where it can be given up — on a worker, whose item the batch stops
#: waiting for once the gate skips it — and in this process wait until an item running now
#: ends (a result may still make it needless).
RUN, SKIP, WAIT = "run", "skip", "wait"


class Batch:
    """Items of one parallel map on the local loky workers. Shared (``begin``): this process
    takes items from the front when ``results`` is called, warmed-up workers take them from
    the back from the start, each under a helper slot; else up to ``jobs`` workers take them
    all. With a ``gate`` (run_parallel) every side takes the first item in order the gate
    lets run. Results are stored as they arrive, in item order."""

    def __init__(self, fn: Callable, args: list[tuple], jobs: int | None, shared: bool,
                 gate: Callable | None = None):
        self.fn, self.args, self.shared, self.gate = fn, args, shared, gate
        self.out: list = [None] * len(args)
        self.pending = deque(range(len(args)))
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)   # an item ended (gated batches wait)
        self.running: set[int] = set()                 # items taken and not finished
        self.skipped: list[int] = []                   # items the gate skipped, not yet told
        self.failure: list[BaseException] = []
        self.stop = threading.Event()
        self.done, self.tick = [], None          # indices finished, in order of arrival
        workers = _workers(jobs)
        self.limit = workers - 1 if shared else workers
        self.helpers, self.thread = None, None
        if self.limit >= 1 and args:
            if shared:
                prestart(fn, workers)
                self.helpers = _STATE["helpers"]
            self.executor = self.helpers.executor if shared else _executor()
            self.portable = _Portable(fn) if self.shared else fn
            self.thread = threading.Thread(target=self._feed, daemon=True)
            self.thread.start()

    def _finished(self, i: int, result) -> None:
        with self.lock:
            if i not in self.running:           # given up (`_abandon_outdone`): unheard
                return
            self.out[i] = result
            self.done.append(i)
            self.running.discard(i)
            self.changed.notify_all()
            tick = self.tick
        if tick is not None:
            tick(i, result)

    def _next(self, front: bool) -> int | None:
        """Take the next item to run (call with the lock held): without a gate the front or
        the back of the queue; with one, the first item in order it lets run, after dropping
        those it skips (their result None, told by ``_tell_skipped``); None when none may
        run now."""
        if self.gate is None:
            i = (self.pending.popleft() if front else self.pending.pop()) if self.pending else None
        else:
            finished = {j: self.out[j] for j in self.done}
            i = None
            for j in list(self.pending):
                verdict = self.gate(j, finished, frozenset(self.running))
                if verdict == WAIT and (not front or not self.running):
                    verdict = RUN            # on a worker, or nothing runs that could settle it
                if verdict == SKIP:
                    self.pending.remove(j)
                    self.done.append(j)
                    self.skipped.append(j)
                elif verdict == RUN:
                    self.pending.remove(j)
                    i = j
                    break
        if i is not None:
            self.running.add(i)
        return i

    def _tell_skipped(self) -> None:
        with self.lock:
            told, self.skipped, tick = self.skipped, [], self.tick
            if told:
                self.changed.notify_all()
        for j in told if tick is not None else ():
            tick(j, None)

    def _take(self, timeout: float) -> bool:
        return self.helpers is None or self.helpers.take(timeout)

    def _feed(self) -> None:
        flying: set = set()
        while not self.stop.is_set():
            with self.lock:
                if not self.pending and not flying:
                    return
                room = bool(self.pending) and len(flying) < self.limit
            if room and self._take(0 if flying else 0.1):
                with self.lock:
                    i = self._next(front=False)
                    if i is None and self.pending and not flying:
                        self.changed.wait(0.1)      # gated: wait for an item to end
                self._tell_skipped()
                if i is None:
                    if self.helpers is not None:
                        self.helpers.give()
                    continue
                try:
                    future = self.executor.submit(_indexed, self.portable, i, *self.args[i])
                except BaseException as exc:                # a broken executor
                    self.failure.append(exc)
                    return
                if self.helpers is not None:
                    future.add_done_callback(self.helpers.give)
                flying.add(future)
                continue
            if flying:
                done, _ = wait(flying, timeout=0.1, return_when=FIRST_COMPLETED)
                for future in done:
                    flying.discard(future)
                    try:
                        self._finished(*future.result())
                    except BaseException as exc:            # re-raised by results()
                        self.failure.append(exc)
                        return

    def results(self, tick: Callable | None = None) -> list:
        """Wait for every item (taking untaken ones in this process when shared), telling
        ``tick(i, result)`` once per item, the ones already done first."""
        with self.lock:
            self.tick, already = tick, list(self.done)
        for i in already if tick else ():
            tick(i, self.out[i])
        try:
            while (self.shared or self.thread is None) and not self.failure:
                with self.lock:
                    if not self.pending:
                        break
                    i = self._next(front=True)
                    if i is None:
                        self.changed.wait(0.1)      # gated: wait for an item to end
                self._tell_skipped()
                if i is not None:
                    self._finished(i, self.fn(*self.args[i]))
            while self.thread is not None and self.thread.is_alive():
                if self._abandon_outdone():
                    break
                self.thread.join(0.2)            # short waits: signals are handled between
        finally:
            self.stop.set()
        if self.failure:
            raise self.failure[0]
        return list(self.out)

    def _abandon_outdone(self) -> bool:
        """With a gate, once no item is left to take: give up the items still running on
        workers when the gate now skips every one of them (their results would be dropped;
        the workers finish them unheard). True when it did."""
        with self.lock:
            if self.gate is None or self.pending or not self.running:
                return False
            finished = {j: self.out[j] for j in self.done}
            if any(self.gate(j, finished, frozenset(self.running - {j})) != SKIP
                   for j in self.running):
                return False
            self.done.extend(self.running)
            self.skipped.extend(self.running)
            self.running.clear()
        self._tell_skipped()
        return True


def _as_args(items: Iterable) -> list[tuple]:
    return [it if isinstance(it, tuple) else (it,) for it in items]


def begin(fn: Callable, items: Iterable, jobs: int | None = None) -> Batch:
    """Start a shared batch now (items on warmed-up workers in the background while this
    process does other work); ``finish`` waits for it, taking in this process whatever no
    worker has taken. In-process only for one job, inside a worker and on the Dask
    backend."""
    return Batch(fn, _as_args(items), jobs, shared=True)


class _Progress:
    """A stderr bar (``progress`` True) or a callable told (items done, items), ticking once
    per finished item, and ``on_result(i, result)`` told each result; a worker that died
    becomes one clear error."""

    def __init__(self, total: int, progress, label: str, on_result: Callable | None = None,
                 weights=None):
        self.total, self.label, self.count, self.on_result = total, label, 0, on_result
        self.notify = progress if callable(progress) else None
        self.weights = weights
        # no tqdm object at all without a bar: even a disabled one creates tqdm's
        # multiprocessing lock, which a worker killed at the end leaves to the resource
        # tracker ("leaked semaphore objects" printed when every sweep ended)
        self.bar = None
        if progress and self.notify is None and weights is None:
            self.bar = tqdm(total=total, desc=label, file=sys.stderr, leave=False)
        elif progress and self.notify is None:   # the share of the estimated work done
            self.bar = tqdm(total=float(sum(weights)) or 1.0, desc=f"{label} 0/{total}",
                            file=sys.stderr, leave=False,
                            bar_format="{l_bar}{bar}| work [{elapsed}<{remaining}]")
        self.lock, self.stop = threading.Lock(), threading.Event()
        if self.bar is not None:
            threading.Thread(target=_ticking, args=(self.bar, self.stop), daemon=True).start()

    def tick(self, i: int, result) -> None:
        with self.lock:
            if self.on_result is not None:
                self.on_result(i, result)
            self.count += 1
            if self.bar is not None and self.weights is None:
                self.bar.update()
            elif self.bar is not None:
                self.bar.set_description_str(f"{self.label} {self.count}/{self.total}",
                                             refresh=False)
                self.bar.update(float(self.weights[i]))
            if self.notify is not None:
                self.notify(self.count, self.total)

    def __enter__(self):
        return self.tick

    def __exit__(self, kind, exc, tb):
        self.stop.set()
        if self.bar is not None:
            self.bar.close()
        if kind is not None and issubclass(kind, (MemoryError, *_loky_deaths(),
                                                  BrokenProcessPool,
                                                  *_BACKEND["deaths"])):
            hint = ("give the Dask workers more memory (dask worker --memory-limit) or fewer "
                    "processes per machine" if _BACKEND["name"] == "dask" else
                    "run with fewer parallel jobs (--jobs 1) or on a larger machine")
            raise TopofinderError(f"{self.label}: a worker ran out of memory or was killed; "
                                  f"{hint}") from None
        return False


def finish(batch: Batch, progress: bool | Callable | None = None,
           label: str = "working") -> list:
    """The results of a batch from ``begin``, in item order (progress as run_parallel)."""
    with _Progress(len(batch.args), progress, label) as tick:
        return batch.results(tick)


def run_parallel(fn: Callable, items: Iterable, jobs: int | None = None,
                 progress: bool | Callable | None = None, label: str = "working",
                 share: bool = False, on_result: Callable | None = None,
                 weights: Sequence[float] | None = None,
                 gate: Callable | None = None) -> list:
    """[fn(*item) for tuple items, fn(item) otherwise], in order, on ``jobs`` workers
    (None: all cores; 1: in this process). Locally never more workers than cores: each holds
    its own copy of the work's memory, and more would only contend for the same cores.
    ``share``: this process is one of the ``jobs`` and starts on the items at once, the
    others join as their workers finish importing (short work: module docstring).
    ``progress``: True for a stderr bar, or a callable told (items done, items) as they end.
    ``on_result(i, result)``: called in this process as item i's result arrives (a Dask
    worker may run on another machine: what must land on this one's disk is written here).
    ``weights``: each item's estimated work; the bar then shows the share of the work done,
    and its ETA follows the work, not the item count (items of very unequal cost).
    ``gate(i, finished, running)``: RUN, SKIP or WAIT for item i, given the results so far
    ({index: result}, None for skipped items) and the indices running now; items are then
    taken in order (locally; the Dask backend runs every item), a skipped item's result is
    None, and WAIT holds this process back while something runs (workers take the item)."""
    args = _as_args(items)
    if weights is not None and len(weights) != len(args):
        raise ValueError(f"{len(weights)} weights for {len(args)} items")
    with _Progress(len(args), progress, label, on_result, weights) as tick:
        if len(args) <= 1 or jobs == 1 or (_BACKEND["name"] == "loky" and _workers(jobs) <= 1):
            out: list = []
            for i, a in enumerate(args):
                skip = gate is not None and gate(i, dict(enumerate(out)), frozenset()) == SKIP
                out.append(None if skip else fn(*a))
                tick(i, out[-1])
            return out
        if _BACKEND["name"] == "loky":
            return Batch(fn, args, jobs, share, gate).results(tick)
        import joblib

        with joblib.parallel_config(backend=_BACKEND["name"], n_jobs=jobs or os.cpu_count()):
            gen = joblib.Parallel(return_as="generator_unordered")(        # as they finish
                joblib.delayed(_indexed)(fn, i, *a) for i, a in enumerate(args))
            out = [None] * len(args)
            for i, result in gen:
                out[i] = result
                tick(i, result)
            return out
