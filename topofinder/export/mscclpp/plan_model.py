"""Check an MSCCL++ execution plan: parse, limits, execution over launches, races, result.

:func:`check_plan` is the entry point. After the canonical run (:class:`.plan_exec.Run`) it
adds the synchronisation edges that depend on counts — the k-th wait ticket of a channel is
ordered after a signal only when that signal is among the first k in *every* order the
signallers could run in (exact when one thread signals the channel) — and the device-semaphore
edges (exact for one releasing and one acquiring thread, none otherwise), then checks:

Relaxed signal/wait (memory channels) order only what preceded the signalling kernel — a kernel
boundary is a system-scope fence — unless ``relaxed_orders``.

- deadlock: no threadblock can progress (the run is monotone in its counters, and a channel
  waited on by threads ordered by happens-before has a fixed ticket order, so the canonical
  run blocks iff every run does; a channel waited on by unordered threads is refused as
  nondeterministic);
- balance: every semaphore gets as many signals as waits in every launch (counters persist,
  so a surplus lets the next launch's wait pass early);
- races: conflicting accesses not ordered by happens-before (:meth:`.plan_state.Graph
  .check_races`), including the host's fresh inputs and its read of the output;
- result: each rank's output after each launch is exactly the collective of that launch's
  inputs (allgather, reduce-scatter, allreduce, broadcast; in or out of place).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from topofinder.errors import TopofinderError

from topofinder.model.collectives import Collective

from .plan_exec import COLLECTIVES, Run
from .plan_ops import run_threadblock
from .plan_limits import H100_SMS, Shape, check_limits
from .plan_parse import parse_plan
from .plan_state import describe, digits_all


@dataclass
class PlanReport(Shape):
    """The verdict, and the plan's figures (:class:`Shape`) with what was run. ``ok`` is true
    when nothing below is wrong."""

    ranks: int
    collective: str
    inplace: bool
    launches: int
    cells_per_chunk: int = 1
    deadlock: str | None = None
    races: list[str] = field(default_factory=list)
    balance_errors: list[str] = field(default_factory=list)
    result_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.deadlock or self.races or self.balance_errors or self.result_errors)

    def first_error(self) -> str | None:
        for err in ([self.deadlock] if self.deadlock else []) + self.balance_errors \
                + self.races + self.result_errors:
            return err
        return None

    def raise_if_failed(self) -> None:
        """Raise the first problem as a one-line :class:`TopofinderError`."""
        err = self.first_error()
        if err:
            raise TopofinderError(f"MSCCL++ plan: {err}")


def check_plan(doc_or_text, collective: str | None = None, max_threadblocks: int = H100_SMS,
               launches: int = 2, relaxed_orders: bool = False, root: int = 0) -> PlanReport:
    """Check a plan (dict, JSON text or bytes) as the executor would run it.

    ``collective`` must match the plan's (default: the plan's own); ``max_threadblocks`` is
    the resident-block limit per rank (132 = H100 SMs); ``launches`` ≥ 2 kernels run in a row;
    ``relaxed_orders`` lets relaxed signal/wait order data (they do not on NVIDIA's memory
    model); ``root`` is broadcast's root. Parse and limit violations raise
    :class:`TopofinderError`; execution findings are in the report.
    """
    plan = parse_plan(doc_or_text)
    coll = COLLECTIVES.get(plan.collective.lower())
    if collective is not None:
        want = COLLECTIVES.get(str(collective).lower())
        if want is None:
            raise TopofinderError(f"unknown collective {collective!r}")
        if coll != want:
            raise TopofinderError(f"MSCCL++ plan: collective is {plan.collective!r}, expected "
                                  f"{collective!r}")
    if not isinstance(launches, int) or launches < 1:
        raise TopofinderError("launches must be a positive integer")
    shape = check_limits(plan, max_threadblocks)
    run = Run(plan, coll or plan.collective, launches, relaxed_orders, root)
    _check_chunks(run)
    report = PlanReport(**vars(shape), ranks=run.n, collective=coll or plan.collective,
                        inplace=plan.inplace, launches=launches, cells_per_chunk=run.G)
    if plan.max_message > shape.max_message_bytes:
        report.notes.append(
            f"max_message_size {plan.max_message} is beyond {shape.max_message_bytes} bytes, "
            "the largest message whose offsets fit 32 bits")
    run.run(run_threadblock)
    report.deadlock = run.deadlock
    _sem_edges(run, report)
    _wait_edges(run, report)
    if not run.deadlock:
        _balance(run, report)
    g = run.graph
    report.races = g.check_races(lambda node: _name(run, node))
    if not run.deadlock and coll is not None:
        report.result_errors = _results(run, coll)
    elif coll is None:
        report.notes.append(f"collective {plan.collective!r} has no result check")
    report.notes.extend(sorted(run.notes))
    return report


def _name(run: Run, node: int) -> str:
    r, tb, what, launch = run.graph.label(node)
    who = "host" if tb == -1 else f"tb {tb}"
    return f"[rank {r} {who} launch {launch}: {what}]"


def _check_chunks(run: Run) -> None:
    plan, n = run.plan, run.n
    for g in plan.gpus:
        cin, cout = g.input_chunks, g.output_chunks
        c = run.collective
        bad = ((c == Collective.ALLGATHER and cout != n * cin)
               or (c == Collective.REDUCE_SCATTER and cin != n * cout)
               or (c in (Collective.ALLREDUCE, Collective.BROADCAST) and cin != cout))
        if bad:
            raise TopofinderError(f"MSCCL++ plan: rank {g.rank}: {cin} input and {cout} output "
                                  f"chunks do not fit {c} on {n} ranks")


def _chained(run: Run, events: list) -> bool:
    """Whether consecutive events (in run order) are ordered by happens-before, so every run
    sees them in this order (checked before any count-derived edge is added)."""
    return all(run.graph.hb(a[0], b[0]) for a, b in zip(events, events[1:]))


def _wait_edges(run: Run, report: PlanReport) -> None:
    """Edges signal → wait. Tickets are fixed when the waits are ordered — by one thread, or by
    happens-before through other synchronisation (device semaphores, barriers, other channels'
    edges already justified: added to a fixpoint, so no edge is justified by itself); the k-th
    ticket is then ordered after the k-th signal when the signals are ordered, else after a
    signal only if it is among the first k whatever order the signalling threads run in. A
    channel whose waits stay unordered is refused: its ticket order is nondeterministic."""
    done: dict = {}                  # channel → True (signals ordered) / False (not yet)
    changed = True
    while changed:
        changed = False
        for key, waits in run.waits.items():
            if done.get(key):
                continue
            if len({w[4] for w in waits}) > 1 and not _chained(run, waits):
                continue
            sigs = run.signals.get(key, [])
            chained = len({s[3] for s in sigs}) == 1 or _chained(run, sigs)
            if key in done and not chained:
                continue
            done[key] = chained
            changed = True
            _add_wait_edges(run, waits, sigs, chained)
    for key in run.waits:
        if key not in done:
            report.balance_errors.append(
                f"rank {key[0]} {key[1]} channel {key[2]} is waited on by unordered threads; "
                "their ticket order is nondeterministic")


def _add_wait_edges(run: Run, waits: list, sigs: list, chained: bool) -> None:
    by_src: dict = {}
    for s in sigs:
        by_src.setdefault(s[3], []).append(s)
    edges = []
    for node, _launch, ticket, relaxed, _src in waits:
        if chained:
            picks = [sigs[ticket - 1]] if ticket <= len(sigs) else []
        else:
            picks = [lst[j - 1] for lst in by_src.values()
                     if (j := min(ticket - (len(sigs) - len(lst)), len(lst))) >= 1]
        for sig in picks:
            strong = run.relaxed_orders or not (relaxed or sig[2])
            # a relaxed pair orders only what preceded the signalling kernel's start
            edges.append((sig[0] if strong else sig[4], node))
    for src, dst in edges:
        run.graph.add_edge(src, dst)


def _sem_edges(run: Run, report: PlanReport) -> None:
    for (r, s), (rel, acq) in run.sem_events.items():
        init = run.plan.gpus[r].semaphores[s]
        if len({x[1] for x in rel}) == 1 and len({x[1] for x in acq}) == 1:
            for j, (node, _src) in enumerate(acq, start=1):
                if j - init >= 1 and j - init <= len(rel):
                    run.graph.add_edge(rel[j - init - 1][0], node)
        elif acq:
            run.notes.add(f"rank {r} device semaphore {s} has several releasing or acquiring "
                          "threads: no ordering taken from it")


def _balance(run: Run, report: PlanReport) -> None:
    keys = set(run.signals) | set(run.waits)
    for key in sorted(keys, key=str):
        sent = Counter(s[1] for s in run.signals.get(key, []))
        got = Counter(w[1] for w in run.waits.get(key, []))
        for launch in range(1, run.launches + 1):
            if sent[launch] != got[launch]:
                if key[0] == "unpaired":
                    what = (f"rank {key[2]} {key[1]} channel {key[3]} to rank {key[4]} has no "
                            "paired channel back")
                else:
                    what = f"rank {key[0]} {key[1]} channel {key[2]}"
                report.balance_errors.append(
                    f"{what}: {sent[launch]} signals but {got[launch]} waits in launch {launch} "
                    "(the counters persist into the next launch)")
                break
    for (r, b), arrivals in run.barriers.items():
        n = run.barrier_n[(r, b)]
        users = Counter(run.graph.label(a)[1] for a in arrivals)
        if len(arrivals) % n:
            report.balance_errors.append(f"rank {r} barrier {b}: {len(arrivals)} arrivals, not a "
                                         f"multiple of {n}")
        elif len(users) != n or len(set(users.values())) != 1:
            report.balance_errors.append(
                f"rank {r} barrier {b}: used by threadblocks {sorted(users)} (counts "
                f"{sorted(users.values())}) for groups of {n}: which arrivals meet depends on "
                "timing")
    for (r, s), value in run.dsem.items():
        if value != run.plan.gpus[r].semaphores[s]:
            report.balance_errors.append(f"rank {r} device semaphore {s} ends at {value}, not its "
                                         f"initial {run.plan.gpus[r].semaphores[s]}")


def _expected(run: Run, coll: str, r: int, launch: int, cell: int):
    g, G, n = run.plan.gpus[r], run.G, run.n
    if coll == Collective.ALLREDUCE:
        return {(launch, cell): digits_all(n)}
    if coll == Collective.BROADCAST:
        return {(launch, cell): 1 << (4 * run.root)}
    if coll == Collective.ALLGATHER:
        per = g.input_chunks * G
        return {(launch, cell % per): 1 << (4 * (cell // per))}
    return {(launch, r * g.output_chunks * G + cell): digits_all(n)}


def _results(run: Run, coll: str, limit: int = 10) -> list[str]:
    errors = []
    for (r, launch), cells in sorted(run.outputs.items()):
        for cell, got in enumerate(cells):
            want = _expected(run, coll, r, launch, cell)
            if got != want:
                chunk, part = divmod(cell, run.G)
                at = f"chunk {chunk}" + (f" part {part}" if run.G > 1 else "")
                errors.append(f"rank {r} output {at} after launch {launch} is "
                              f"{describe(got, run.n)}, expected {describe(want, run.n)}")
                if len(errors) >= limit:
                    return errors
    return errors
