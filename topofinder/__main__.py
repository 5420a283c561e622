"""`python -m topofinder` and the ``topofinder`` program (whose script imports :func:`entry`
from here) run the command line. Importing this module first installs start-up signal
handlers, so Ctrl-C while the modules load (before the command line installs its own) ends
the run with the same one line and exit 130 instead of an import traceback, and gives a
standard stream that started closed /dev/null (:func:`_reserve_closed_streams`)."""

import os
import signal
import sys


def _interrupted_while_starting(signum, frame) -> None:
    sys.stderr.write("topofinder: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, _interrupted_while_starting)


def _reserve_closed_streams() -> None:
    """Standard input, output and error started closed (`2>&-`) get /dev/null at their
    descriptor, so no file the command opens lands on 0, 1 or 2 (its error message would be
    written into that file; with stderr closed every message was EBADF and the exit status
    1). A closed standard output stays closed to the command: it is told so in one line."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if fd == 1:
                sys.stdout = None


_reserve_closed_streams()

from topofinder.cli.main import entry  # noqa: E402  (after the start-up handlers)

__all__ = ["entry"]

if __name__ == "__main__":
    entry()
