"""Ctrl-C, SIGTERM and SIGHUP honoured within a second, even inside native solvers.

Python runs signal handlers only between bytecodes, so a long HiGHS solve (which releases the
GIL but does not return) would delay an interrupt until it ends (53–58 s for `score --alltoall
exact`). :func:`install` keeps the normal path — the handler raises KeyboardInterrupt, the
command line stops its workers and says "interrupted" (exit 130) — and adds a watchdog thread
woken by the signal itself (``signal.set_wakeup_fd``): when the main thread has not handled a
signal GRACE_S seconds after it arrived, the watchdog stops the workers, writes the same line
and ends the process with exit status 130.
"""

from __future__ import annotations

import os
import signal
import threading

from topofinder.compute.parallel import stop_workers

#: Seconds the main thread has to handle a signal before the watchdog ends the process.
GRACE_S = 0.5
EXIT_INTERRUPTED = 130
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_count = {"handled": 0, "installed": False}


def _raise(signum, frame) -> None:
    """Every honoured signal ends the run like Ctrl-C (workers stopped, temporary files gone)."""
    _count["handled"] += 1
    raise KeyboardInterrupt


def _watch(fd: int) -> None:
    seen = 0
    while True:
        data = os.read(fd, 64)
        if not data:
            return
        seen += sum(1 for b in data if b in _SIGNALS)
        threading.Event().wait(GRACE_S)
        if _count["handled"] < seen:                  # the main thread is inside native code
            stop_workers()
            os.write(2, b"topofinder: interrupted\n")
            os._exit(EXIT_INTERRUPTED)


def interrupted() -> bool:
    """Whether this process has honoured a signal: an error that follows is its consequence
    (e.g. a module whose start-up the KeyboardInterrupt cut short fails to import)."""
    return _count["handled"] > 0


def install() -> None:
    """Install the handlers and the watchdog once per process (main thread only)."""
    if _count["installed"] or threading.current_thread() is not threading.main_thread():
        return
    for sig in _SIGNALS:
        signal.signal(sig, _raise)
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read,), daemon=True, name="topofinder-signals").start()
    _count["installed"] = True
