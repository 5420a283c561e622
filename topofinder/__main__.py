"""`python -m topofinder` and the ``topofinder`` program (whose script imports :func:`entry`
from here) run the command line. Importing this module first installs start-up signal
handlers, so Ctrl-C while the modules load (before the command line installs its own) ends
the run with the same one line and exit 130 instead of an import traceback."""

import os
import signal
import sys


def _interrupted_while_starting(signum, frame) -> None:
    sys.stderr.write("topofinder: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, _interrupted_while_starting)

from topofinder.cli.main import entry  # noqa: E402  (after the start-up handlers)

__all__ = ["entry"]

if __name__ == "__main__":
    entry()
