"""The options of `topofinder run` (and ``python -m topofinder.run``): what the command line
needs to build its parser, without loading the executor (topofinder.execute.mpi)."""

from __future__ import annotations

import argparse

import numpy as np

DTYPES = {"float32": (np.float32, 24), "float64": (np.float64, 53)}   # (type, mantissa bits)

DESCRIPTION = ("Execute a step schedule ('topofinder export EXPR --what schedule') or a tree "
               "schedule ('--kind trees') under MPI on real buffers, check the result "
               "against MPI's own collective, and print time, algbw and busbw "
               "(nccl-tests' terms) next to the α-β prediction. Start with "
               "'mpiexec -n N topofinder run SCHEDULE.json' where N is the schedule's node "
               "count. Exit status 0: verified; 1: result differs from MPI's; 2: bad input.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``topofinder run`` (shared by ``python -m topofinder.run``)."""
    p.add_argument("schedule", metavar="SCHEDULE.json",
                   help="step or tree schedule JSON written by 'topofinder export'")
    p.add_argument("--size", default="64MB",
                   help="buffer size M per rank (allgather output, reduce-scatter input, "
                        "allreduce buffer), B/KB/MB/GB; rounded to a multiple of the N·P "
                        "pieces the schedule needs (default 64MB)")
    p.add_argument("--iters", type=int, default=10,
                   help="timed runs; the median is reported (default 10)")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed runs before timing, verified too (default 2)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                   help="element type (default float32)")
    p.add_argument("--alpha", default="10us",
                   help="α-β prediction: per-step latency α (default 10us)")
    p.add_argument("--bandwidth", default="100Gbps",
                   help="α-β prediction: node bandwidth B = d links × b (default 100Gbps)")
    p.add_argument("--pipeline", type=int, default=1, metavar="K",
                   help="tree schedules: cut every tree's data into K slices that follow "
                        "each other down the tree one step apart; one-root periodic schedules: "
                        "run K periods' worth of messages (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON document (rank 0)")
