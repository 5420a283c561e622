"""A run stopped by SIGTERM, SIGHUP or Ctrl-C leaves no worker process behind and says so in
one line (exit 130)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _processes_with(marker: str) -> list[int]:
    """Pids whose environment carries ``marker`` (the workers inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_stops_the_workers(tmp_path, sig):
    marker = f"TOPOFINDER_SIGNAL_TEST={tmp_path.name}"
    env = {**os.environ, "TOPOFINDER_CACHE": str(tmp_path / "cache"),
           "TOPOFINDER_SIGNAL_TEST": tmp_path.name}
    proc = subprocess.Popen([sys.executable, "-m", "topofinder", "search", "--n", "2000",
                             "--d", "8", "--no-cache", "--jobs", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(_processes_with(marker)) < 2 and time.monotonic() < deadline:    # + a worker
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    assert len(_processes_with(marker)) >= 2, "the workers never started"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-500:]
    assert err.rstrip().endswith("topofinder: interrupted")
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _processes_with(marker)
    for pid in left:                              # do not leak them into the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"worker processes left behind: {left}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_sigkill_of_the_main_process_takes_the_workers_along(tmp_path):
    """SIGKILL cannot be handled, so the workers themselves must notice (they ask the kernel
    for SIGTERM when their parent dies)."""
    marker = f"TOPOFINDER_SIGNAL_TEST={tmp_path.name}"
    env = {**os.environ, "TOPOFINDER_CACHE": str(tmp_path / "cache"),
           "TOPOFINDER_SIGNAL_TEST": tmp_path.name}
    proc = subprocess.Popen([sys.executable, "-m", "topofinder", "search", "--n", "2000",
                             "--d", "8", "--no-cache", "--jobs", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(_processes_with(marker)) < 2 and time.monotonic() < deadline:    # + a worker
        time.sleep(0.2)
    assert len(_processes_with(marker)) >= 2, "the workers never started"
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _processes_with(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"worker processes left behind: {left}"
