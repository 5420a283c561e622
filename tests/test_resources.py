"""Resource guards computed before work starts: parallel verifications limited by memory,
workers by cores."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topofinder.compute import parallel
from topofinder.errors import TopofinderError
from topofinder.finder import frontier

ROOT = Path(__file__).resolve().parent.parent


def test_verifications_in_parallel_fit_the_memory(monkeypatch):
    gib = 1 << 30
    monkeypatch.setattr(frontier, "_available_memory", lambda: 24 * gib)
    per = frontier.VERIFY_BYTES_PER_N2D * 1796 * 1796 * 16        # one N = 1796, d = 16 replay
    assert frontier.verify_jobs(1796, 16, 8) == min(8, int(0.8 * 24 * gib) // per)
    assert frontier.verify_jobs(4096, 16, None) == 1
    assert frontier.verify_jobs(64, 4, 3) == 3
    monkeypatch.setattr(frontier, "_available_memory", lambda: 1)
    assert frontier.verify_jobs(64, 4, 3) == 1                  # always at least one


def test_available_memory_is_plausible():
    mem = frontier._available_memory()
    assert 0 < mem <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_workers_never_exceed_the_cores():
    seen = parallel.run_parallel(lambda i: os.getpid(), range(40), jobs=1000)
    assert len(set(seen)) <= (os.cpu_count() or 1)


def _slow_pid(i: int, seconds: float = 0.3) -> tuple[int, int]:
    time.sleep(seconds)
    return i, os.getpid()


def _killed_off_the_main_process(parent: int, i: int) -> int:
    """Killed like by the out-of-memory killer, except in the process that started the batch."""
    if os.getpid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)
    return i


def _worker_took_one(batch, count: int, seconds: float = 120.0) -> None:
    """Wait (the machine may be loaded) until a worker has taken an item of ``batch``."""
    deadline = time.time() + seconds
    while len(batch.pending) == count and time.time() < deadline:
        time.sleep(0.05)
    assert len(batch.pending) < count, "no worker took an item"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores")
def test_a_shared_batch_runs_here_and_on_a_warmed_up_worker():
    """begin/finish: a warmed-up worker takes items from the back in the background, this
    process the rest from the front; results come back in item order."""
    batch = parallel.begin(_slow_pid, range(8), jobs=2)
    _worker_took_one(batch, 8)
    out = parallel.finish(batch)
    assert [i for i, _ in out] == list(range(8))
    here = [pid == os.getpid() for _, pid in out]
    assert here[0] and not here[-1]                   # the front here, the back on the worker
    assert here == sorted(here, reverse=True)         # a prefix here, a suffix there
    assert len({pid for _, pid in out}) == 2


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores")
def test_a_worker_killed_in_a_shared_batch_is_one_clear_error():
    batch = parallel.begin(_killed_off_the_main_process, [(os.getpid(), i) for i in range(6)],
                           jobs=2)
    _worker_took_one(batch, 6)
    with pytest.raises(TopofinderError, match="ran out of memory or was killed"):
        parallel.finish(batch)


def test_one_job_runs_in_this_process():
    batch = parallel.begin(_slow_pid, [(i, 0.0) for i in range(3)], jobs=1)
    assert batch.thread is None
    assert parallel.finish(batch) == [(i, os.getpid()) for i in range(3)]


def test_a_weighted_bar_shows_the_share_of_the_work_done(capsys):
    """Items of unequal cost: the bar advances by each item's weight (1 of 4 units after the
    first of two items, not 1 of 2), so its ETA follows the work; the label counts items."""
    parallel.run_parallel(time.sleep, [0.2, 0.2], jobs=1, progress=True, label="verifying",
                          weights=[1, 3])                  # slower than tqdm's redraw interval
    err = capsys.readouterr().err
    assert "verifying 1/2:  25%" in err and "verifying 2/2: 100%" in err
    with pytest.raises(ValueError, match="2 weights for 3 items"):
        parallel.run_parallel(abs, [1, 2, 3], jobs=1, weights=[1, 3])


def test_verify_work_counts_the_replayed_rows():
    from types import SimpleNamespace
    from topofinder.finder.recipe import from_expression
    from topofinder.finder.verify import AUTOMORPHISM_ROWS_PER_ARC, verify_work
    small = SimpleNamespace(recipe=from_expression("C(8,{1,2})"), n=8, d=4)
    assert verify_work(small) == 8 * 8 * 4 + AUTOMORPHISM_ROWS_PER_ARC * 8 * 4


_FAULTS = """
import resource, sys
import numpy as np
from topofinder.compute.memory import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(30):
    a = np.ones((1_000_000 + i, 8))                  # 64 MB, freed at once
    del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_freed_memory_is_reused_instead_of_faulted_in_again():
    """keep_freed_memory: thirty 64 MB arrays allocated and freed in turn fault their pages in
    about once, not thirty times (16k 4 KiB pages each with the default allocator, which maps
    blocks above 32 MiB afresh every time; NumPy's huge pages off to count small pages)."""
    def faults(mode: str) -> int:
        run = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True,
                             text=True, check=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT), NUMPY_MADVISE_HUGEPAGE="0"))
        return int(run.stdout)
    default, kept = faults("default"), faults("keep")
    assert default > 30 * 10_000
    assert kept < default / 10


_HOLES = """
import sys
import numpy as np
from topofinder.compute.memory import keep_freed_memory, release_freed_memory

def rss_mb():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmRSS")) // 1024

assert keep_freed_memory()
blocks, pins = [], []
for _ in range(4):                       # 4 x 128 MB from the heap, each pinned below a live
    blocks.append(np.ones(16_000_000))   # 1 MB block (too large for any older free chunk, so
    pins.append(np.ones(131_072))        # it lands right above), leaving holes the heap
                                         # cannot trim from its top
before = rss_mb()
del blocks
held = rss_mb()
assert release_freed_memory()
print(before, held, rss_mb())
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's")
def test_released_memory_leaves_the_worker():
    """release_freed_memory returns heap holes to the system: 512 MB freed below live blocks
    stays resident until it is called (loky would take that for a leak and restart the
    worker), and is gone after."""
    run = subprocess.run([sys.executable, "-c", _HOLES], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    before, held, after = map(int, run.stdout.split())
    assert held > before - 100                # freed, yet still resident
    assert after < held - 400                 # returned by malloc_trim
