"""`python -m topofinder` runs the command line. Ctrl-C while the modules load (before the
command line installs its own handlers) ends the run with the same one line and exit 130."""

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

entry()
