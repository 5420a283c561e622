"""Resource guards computed before work starts: parallel verifications limited by memory,
workers by cores."""

from __future__ import annotations

import os

from topofinder.compute import parallel
from topofinder.finder import frontier


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
