"""The ``topofinder`` command (docs/cli.md): one module per command parses its arguments,
calls :mod:`topofinder.api` and prints; this one dispatches and turns errors into one line.

Bad input: one line on stderr saying what was wrong and what is accepted, exit status 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from topofinder import api
from topofinder.cli import bench, catalog, check, export, fail, run, score, search, sweep
from topofinder.cli.common import Parser
from topofinder.errors import TopofinderError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
#: The commands in the order --help lists them.
COMMANDS = (search, score, export, check, fail, bench, catalog, sweep, run)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="topofinder",
                    description="Topology/schedule co-design search for direct-connect "
                                "fabrics: find, score and export topologies and collective "
                                "schedules for N nodes with d ports each.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in COMMANDS:
        command.add(sub)
    for command_parser in sub.choices.values():     # its own name in an unrecognised-option error
        command_parser.set_defaults(command_parser=command_parser)
    return parser


class _ClosedStdout:
    """Standing in for a closed standard output: the first write is a one-line error."""

    def write(self, text: str) -> int:
        raise TopofinderError("standard output is closed; give an output file with -o")

    def flush(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    if sys.stdout is None:                       # started with stdout closed (`>&-`)
        sys.stdout = _ClosedStdout()
    if sys.stderr is None:                       # `2>&-`: progress bars wrote to None (exit 1)
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    try:
        api.install_interrupt_handlers()
        api.keep_freed_memory()
        if hasattr(sys.stdout, "reconfigure"):  # tables on an ASCII-only terminal: µ → \xb5
            sys.stdout.reconfigure(errors="backslashreplace")
        with api.command_scope():
            return _main(argv)
    except KeyboardInterrupt:                    # a signal just before or after _main's own try
        _say("interrupted")
        return EXIT_INTERRUPTED
    finally:
        try:
            api.stop_workers()
        except KeyboardInterrupt:                # a second signal while they stop: finish that
            api.stop_workers()


def entry() -> None:
    """The ``topofinder`` program: :func:`main`, then exit with its status. The command is
    done by then, so a signal during the interpreter's teardown is ignored instead of killing
    the process without a word (status -2 where main said 0)."""
    code = main()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if code == EXIT_INTERRUPTED:
        # said and cleaned up: end now. CPython 3.11 remembers a KeyboardInterrupt that
        # passed through a module's import (a lazy one cut short mid-command) even though
        # main caught it, and would end the process by SIGINT (status -2) at exit.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def _main(argv: list[str] | None) -> int:
    try:
        args, extra = build_parser().parse_known_args(argv)
        if extra:
            args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return args.run(args)
    except TopofinderError as exc:
        _say(f"error: {exc}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except ImportError:                          # a module whose start-up a signal cut short
        if not api.was_interrupted():
            raise
        _say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader closed stdout (e.g. `| head`): stop quietly, no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        return 1
    except OSError as exc:                       # I/O the writers did not name themselves
        where = f" ({exc.filename})" if exc.filename else ""
        _say(f"error: {exc.strerror or exc}{where}")
        return EXIT_BAD_INPUT
    except UnicodeDecodeError:                   # a reader that did not name the file itself
        _say("error: an input file is not UTF-8 text")
        return EXIT_BAD_INPUT
    except MemoryError:
        _say("error: out of memory; try a smaller N or --jobs 1")
        return EXIT_BAD_INPUT
    except RecursionError:                       # a JSON/TOML/XML input nested thousands deep
        _say("error: an input document is nested too deeply to read")
        return EXIT_BAD_INPUT


def _say(message: str) -> None:
    """One line on stderr (from rank 0 only under mpiexec; nothing if stderr is closed)."""
    if not api.is_quiet_rank() and sys.stderr is not None:
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        print(f"topofinder: {line}", file=sys.stderr)


if __name__ == "__main__":
    entry()
