"""The process helpers every front-end command uses: interrupts, freed memory, parallel
workers, the rank that speaks under MPI, and the outputs that may not replace an input.
Light on purpose: the command line loads it for every command (docs/performance.md)."""

from __future__ import annotations

from topofinder.compute import interrupt, memory, output, parallel
from topofinder.execute import is_quiet_rank

#: Stop this process's parallel workers now (after a run, or when interrupted).
stop_workers = parallel.stop_workers
#: Ctrl-C, SIGTERM and SIGHUP honoured within a second, even inside native solvers (a front
#: end's main thread calls it once).
install_interrupt_handlers = interrupt.install
#: Have this process reuse the memory it frees instead of faulting in fresh pages for every
#: large array (a front end's process, which it owns, calls it once; topofinder.compute.memory).
keep_freed_memory = memory.keep_freed_memory
#: Whether a signal has been honoured in this process (an error after it is its consequence).
was_interrupted = interrupt.interrupted
#: Context of one front-end command: its outputs may not replace its inputs or each other.
command_scope = output.command
#: Refuse, before anything is written, outputs that name one file twice, or one output path
#: that could not be written (an input, a directory, the command's own stdout).
distinct_outputs = output.distinct_outputs
check_output = output.checked_target
#: Record a path as an input of the current command (an output naming it is then refused).
note_input = output.note_input

__all__ = ["check_output", "command_scope", "distinct_outputs", "install_interrupt_handlers",
           "is_quiet_rank", "keep_freed_memory", "note_input", "stop_workers",
           "was_interrupted"]
