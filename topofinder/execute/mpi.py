"""MPI executor: run a step or tree schedule on real buffers with mpi4py and check it
(the CPU path of paper 001 §7).

``mpiexec -n N topofinder run SCHEDULE.json [--size 64MB] [--iters K] [--json]`` (or
``python -m topofinder.run``): every rank fills its buffer with integer-valued floats, runs
the schedule step by step — per step one non-blocking Isend/Irecv per peer of a packed
contiguous message (:mod:`topofinder.execute.plan`) and a Waitall — and compares its result
exactly with MPI's own collective on the same data (MPI_Allgather, MPI_Reduce_scatter_block,
MPI_Allreduce; MPI_Bcast and MPI_Reduce for the periodic one-root schedules of paper 003,
``--pipeline K`` running K periods' worth of messages). Integer values keep every floating-point sum exact, whatever the order.

Reported in nccl-tests' terms: size = the full buffer M (allgather output, reduce-scatter
input, allreduce buffer), time = median over ``--iters`` runs after ``--warmup`` runs of the
slowest rank's time, algbw = M/time, busbw = algbw·(N−1)/N (allgather, reduce-scatter) or
algbw·2(N−1)/N (allreduce); next to the α-β prediction T_L·α + τ·M/B of the executed steps
(paper 001 §3: T_L steps, τ in units of M/B).

Exit status: 0 verified, 1 the result differs from MPI's, 2 bad input (one line on stderr
from rank 0; every rank leaves cleanly).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from topofinder.errors import TopofinderError
from topofinder.execute import is_quiet_rank
from topofinder.execute.options import DESCRIPTION, DTYPES, add_arguments
from topofinder.execute.plan import (
    Program, allocate, chunk_elements, incoming, outgoing, program_from_document,
    rank_plan, read_document,
)
from topofinder.workload.cost import parse_bandwidth, parse_size, parse_time
from topofinder.model.collectives import Collective

EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT = 0, 1, 2
MPI_NAMES = {Collective.BROADCAST: "MPI_Bcast", Collective.REDUCE: "MPI_Reduce",
             Collective.ALLGATHER: "MPI_Allgather",
             Collective.REDUCE_SCATTER: "MPI_Reduce_scatter_block",
             Collective.ALLREDUCE: "MPI_Allreduce"}
_PROG = "topofinder run"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of usage dumps."""

    def error(self, message: str):  # noqa: D401 - argparse hook
        raise TopofinderError(f"{self.prog}: {message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=_PROG, description=DESCRIPTION)
    add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """``python -m topofinder.run``: parse, run, exit status as :func:`run`."""
    try:
        args = build_parser().parse_args(argv)
    except TopofinderError as exc:
        _say(f"{exc}")
        return EXIT_BAD_INPUT
    return run(args)


def _say(message: str) -> None:
    """One error line on stderr, from rank 0 only (before MPI starts: by launcher rank)."""
    if not is_quiet_rank():
        print(f"topofinder: error: {message}", file=sys.stderr, flush=True)


def run(args) -> int:
    """Run ``args.schedule`` on MPI.COMM_WORLD and report on rank 0 (module docstring)."""
    try:
        options = _options(args)
    except TopofinderError as exc:
        _say(str(exc))
        return EXIT_BAD_INPUT
    try:
        from mpi4py import MPI
    except ImportError as exc:
        _say(f"run needs mpi4py and an MPI library: pip install 'topofinder[mpi]' ({exc})")
        return EXIT_BAD_INPUT
    comm = MPI.COMM_WORLD
    program, payload = None, None
    if comm.rank == 0:
        try:
            program = program_from_document(read_document(args.schedule), args.pipeline)
            payload = _payload(program)
        except TopofinderError as exc:
            payload = {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a loader bug must not hang the other ranks
            payload = {"error": f"cannot load schedule {args.schedule}: "
                                f"{type(exc).__name__}: {exc}"}
    payload = comm.bcast(payload, root=0)
    if "error" in payload:
        if comm.rank == 0:
            print(f"topofinder: error: {payload['error']}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    if payload["num_nodes"] != comm.size:
        if comm.rank == 0:
            print(f"topofinder: error: the schedule is for N = {payload['num_nodes']} ranks, "
                  f"this run has {comm.size}: start it with 'mpiexec -n "
                  f"{payload['num_nodes']} ...'", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    if comm.rank != 0:
        program = Program(payload["collective"], payload["num_nodes"], payload["shard_chunks"],
                          payload["sends"], payload["reduce_steps"], payload["kind"],
                          payload["topology"], payload["method"], root=payload["root"])
    try:
        result = _execute(MPI, comm, program, options)
    except Exception as exc:  # noqa: BLE001 - one rank failing must not leave others waiting
        print(f"topofinder: error: rank {comm.rank}: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)
        comm.Abort(EXIT_BAD_INPUT)
        return EXIT_BAD_INPUT
    if comm.rank == 0:
        report = _report(program, options, result, args)
        if args.json:
            print(json.dumps(report, indent=2), flush=True)
        else:
            print(_text(report), flush=True)
    return EXIT_OK if result["verified"] else EXIT_WRONG


def _options(args) -> dict:
    if args.iters < 1:
        raise TopofinderError(f"{_PROG}: --iters must be at least 1, got {args.iters}")
    if args.warmup < 0:
        raise TopofinderError(f"{_PROG}: --warmup must not be negative, got {args.warmup}")
    if args.pipeline < 1:
        raise TopofinderError(f"{_PROG}: --pipeline must be at least 1, got {args.pipeline}")
    return {"size": parse_size(args.size), "alpha_s": parse_time(args.alpha),
            "bandwidth_Bps": parse_bandwidth(args.bandwidth), "iters": args.iters,
            "warmup": args.warmup, "dtype": args.dtype, "seed": args.seed}


def _payload(program: Program) -> dict:
    """What ranks other than 0 need (rank 0 keeps the schedule for the prediction)."""
    return {"collective": program.collective, "num_nodes": program.num_nodes,
            "shard_chunks": program.shard_chunks, "sends": np.asarray(program.sends),
            "reduce_steps": program.reduce_steps, "kind": program.kind,
            "topology": program.topology, "method": program.method, "root": program.root}


# ---- execution -----------------------------------------------------------------------------
def _execute(MPI, comm, program: Program, options: dict) -> dict:
    """Verify and time the schedule and MPI's collective; the same dict on every rank."""
    n, rank = comm.size, comm.rank
    dtype, mantissa = DTYPES[options["dtype"]]
    itemsize = np.dtype(dtype).itemsize
    e = chunk_elements(options["size"], itemsize, program.pieces)
    count = program.pieces * e
    shard = program.shard_chunks * e
    own = slice(rank * shard, (rank + 1) * shard)
    steps = rank_plan(program, rank, e)
    allocate(steps, dtype)

    # integer values with |N·value| < 2^mantissa: every partial sum is exact in any order
    bound = min(1000, (2 ** mantissa - 1) // n)
    rng = np.random.default_rng([options["seed"], rank])
    coll, root = program.collective, program.root
    length = shard if coll == Collective.ALLGATHER else count
    src = rng.integers(-bound, bound + 1, length).astype(dtype)
    ref = np.empty(shard if coll == Collective.REDUCE_SCATTER else count, dtype)

    def reference():
        if coll == Collective.ALLGATHER:
            comm.Allgather(src, ref)
        elif coll == Collective.REDUCE_SCATTER:
            comm.Reduce_scatter_block(src, ref)
        elif coll == Collective.BROADCAST:
            ref[:] = src
            comm.Bcast(ref, root=root)
        elif coll == Collective.REDUCE:
            comm.Reduce(src, ref, root=root)
        else:
            comm.Allreduce(src, ref)

    reference()
    checked = coll != Collective.REDUCE or rank == root      # a reduce ends at the root only
    expected = ref.copy()
    work = np.empty(count, dtype)
    result = work[own] if coll == Collective.REDUCE_SCATTER else work

    def schedule():
        if coll == Collective.ALLGATHER:
            work[own] = src
        elif coll != Collective.BROADCAST or rank == root:
            work[:] = src
        for step in steps:
            tag = step.t % 32768
            reqs = [comm.Irecv(m.buffer, source=m.peer, tag=tag) for m in step.recvs]
            reqs += [comm.Isend(outgoing(m, work, step.reduce), dest=m.peer, tag=tag)
                     for m in step.sends]
            MPI.Request.Waitall(reqs)
            for m in step.recvs:
                incoming(m, work, step.reduce)

    wrong, worst = 0, 0.0
    times = []
    for i in range(options["warmup"] + options["iters"]):
        work.fill(np.nan)          # a piece the schedule never delivers stays NaN
        comm.Barrier()
        t0 = MPI.Wtime()
        schedule()
        dt = MPI.Wtime() - t0
        bad = result != expected
        if checked and bad.any():
            wrong = max(wrong, int(bad.sum()))
            diff = np.abs(result.astype(np.float64) - expected)
            worst = max(worst, float(np.nan_to_num(diff, nan=np.inf).max()))
        if i >= options["warmup"]:
            times.append(comm.allreduce(dt, op=MPI.MAX))
    mpi_times = []
    for i in range(options["warmup"] + options["iters"]):
        comm.Barrier()
        t0 = MPI.Wtime()
        reference()
        dt = MPI.Wtime() - t0
        if i >= options["warmup"]:
            mpi_times.append(comm.allreduce(dt, op=MPI.MAX))
    wrong_total = comm.allreduce(wrong, op=MPI.SUM)
    first_bad = comm.allreduce(rank if wrong else n, op=MPI.MIN)
    return {"verified": wrong_total == 0, "wrong_elements": wrong_total,
            "max_abs_error": comm.allreduce(worst, op=MPI.MAX),
            "first_wrong_rank": None if first_bad == n else first_bad,
            "chunk_elements": e, "count": count, "itemsize": itemsize,
            "times_s": times, "mpi_times_s": mpi_times,
            "runs_checked": options["warmup"] + options["iters"],
            "library": " ".join(MPI.Get_library_version().splitlines()[0].split())}


# ---- report --------------------------------------------------------------------------------
def _bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw: (n−1)/n for allgather and reduce-scatter, 2(n−1)/n for
    allreduce, 1 for broadcast and reduce."""
    if collective in (Collective.BROADCAST, Collective.REDUCE):
        return 1.0
    return (2.0 if collective == Collective.ALLREDUCE else 1.0) * (n - 1) / n


def _rates(m_bytes: int, seconds: float | None, factor: float) -> dict:
    if not seconds:
        return {"time_s": seconds, "algbw_GBps": None, "busbw_GBps": None}
    alg = m_bytes / seconds / 1e9
    return {"time_s": seconds, "algbw_GBps": alg, "busbw_GBps": alg * factor}


def _report(program: Program, options: dict, result: dict, args) -> dict:
    n, coll = program.num_nodes, program.collective
    m = result["count"] * result["itemsize"]
    factor = _bus_factor(coll, n)
    tau, why = None, None
    if program.schedule is not None:
        try:
            tau = program.schedule.tau
        except TopofinderError as exc:
            why = str(exc)
    predicted = None
    if tau is not None:
        predicted = program.num_steps * options["alpha_s"] + float(tau) * m / \
            options["bandwidth_Bps"]
    requested = options["size"]
    doc = {
        "schedule": args.schedule, "collective": coll, "kind": program.kind,
        "topology": program.topology, "method": program.method, "ranks": n,
        "steps": program.num_steps, "shard_chunks": program.shard_chunks,
        "pieces": program.pieces, "dtype": options["dtype"],
        "chunk_elements": result["chunk_elements"], "elements": result["count"],
        "bytes": m, "requested_bytes": requested, "rounded": m != requested,
        "verified": result["verified"], "checked_against": MPI_NAMES[coll],
        "runs_checked": result["runs_checked"], "wrong_elements": result["wrong_elements"],
        "max_abs_error": result["max_abs_error"],
        "first_wrong_rank": result["first_wrong_rank"],
        "iters": options["iters"], "warmup": options["warmup"],
        "busbw_factor": factor,
        "measured": {**_rates(m, float(np.median(result["times_s"])), factor),
                     "times_s": result["times_s"]},
        "mpi": {**_rates(m, float(np.median(result["mpi_times_s"])), factor),
                "times_s": result["mpi_times_s"]},
        "predicted": {**_rates(m, predicted, factor), "T_L": program.num_steps,
                      "tau": None if tau is None else f"{tau.numerator}/{tau.denominator}",
                      "alpha_s": options["alpha_s"],
                      "bandwidth_Bps": options["bandwidth_Bps"]},
        "mpi_library": result["library"],
    }
    if why:
        doc["predicted"]["unavailable"] = why
    if program.kind == "trees":
        doc["pipeline"] = program.pipeline
        doc["tree_flow_tau"] = (None if program.tree_tau is None else
                                f"{program.tree_tau.numerator}/{program.tree_tau.denominator}")
    return doc


def _fmt_rate(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _text(doc: dict) -> str:
    n, coll = doc["ranks"], doc["collective"]
    what = "tree schedule" if doc["kind"] == "trees" else "step schedule"
    lines = [f"topofinder run: {coll} of {doc['topology']} ({doc['method'] or 'unnamed'} "
             f"{what}, {doc['steps']} steps, P = {doc['shard_chunks']} chunks per shard) on "
             f"{n} ranks, {doc['dtype']}, {doc['mpi_library']}"]
    size = (f"size: {doc['bytes']} B per rank = {doc['pieces']} pieces (N·P) × "
            f"{doc['chunk_elements']} {doc['dtype']}")
    if doc["rounded"]:
        size += (f" (requested {doc['requested_bytes']:.0f} B, rounded to a multiple of the "
                 f"{doc['pieces']} pieces the schedule needs)")
    lines.append(size)
    runs = doc["runs_checked"]
    if doc["verified"]:
        lines.append(f"verified: yes, equal to {doc['checked_against']} on all {n} ranks in "
                     f"every run ({runs}; integer-valued data: exact comparison)")
    else:
        lines.append(f"verified: NO, differs from {doc['checked_against']}: up to "
                     f"{doc['wrong_elements']} wrong elements per run summed over ranks, "
                     f"first on rank {doc['first_wrong_rank']}, max |error| "
                     f"{doc['max_abs_error']:g} (inf: never delivered)")
    width = max(26, len(doc["checked_against"]) + 10)
    lines.append(f"{'':<{width}}{'time (us)':>12}{'algbw (GB/s)':>15}{'busbw (GB/s)':>15}")
    rows = [("schedule (median)", doc["measured"]),
            (f"{doc['checked_against']} (median)", doc["mpi"]),
            ("α-β prediction", doc["predicted"])]
    for label, r in rows:
        t = "-" if r["time_s"] is None else f"{r['time_s'] * 1e6:.1f}"
        lines.append(f"{label:<{width}}{t:>12}{_fmt_rate(r['algbw_GBps']):>15}"
                     f"{_fmt_rate(r['busbw_GBps']):>15}")
    p = doc["predicted"]
    if p["tau"] is not None:
        lines.append(f"prediction: T_L·α + τ·M/B = {p['T_L']} × {p['alpha_s'] * 1e6:g} us + "
                     f"{p['tau']} × {doc['bytes']} B / {p['bandwidth_Bps'] / 1e9:g} GB/s; "
                     f"busbw = algbw × {doc['busbw_factor']:.4g}")
    else:
        lines.append(f"prediction unavailable: {p.get('unavailable', 'no τ')}")
    if doc["kind"] == "trees":
        lines.append(f"trees run as steps (pipeline K = {doc['pipeline']}); the pipelined "
                     f"tree-flow τ is {doc['tree_flow_tau']} (paper 002)")
    lines.append(f"timed runs: {doc['iters']}, after {doc['warmup']} warm-up; time = the "
                 f"slowest rank's, median over the timed runs")
    return "\n".join(lines)
