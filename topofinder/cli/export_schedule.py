"""`topofinder export EXPR --what schedule`: the replay-validated step, tree or all-to-all
schedule as json, an MSCCL++ execution plan, MSCCL XML or npz
(:func:`topofinder.api.export_schedule_of`)."""

from __future__ import annotations

import os
import sys
import time

from topofinder import api
from topofinder.cli.common import add_workload, source
from topofinder.api import Collective
from topofinder.errors import TopofinderError


def add_options(p) -> None:
    block = p.add_mutually_exclusive_group()
    block.add_argument("--rank", type=int, default=None, metavar="R",
                       help="schedule: only rank R's sends and receives (steps, peers, chunk "
                            "runs), at any N: a per-rank document (json or npz; "
                            "docs/formats.md), beyond the replay limit generated from the "
                            "expansion rules or carried from the orbit form by the symmetry "
                            "group; 'check PLAN FILES...' checks a set of them together")
    block.add_argument("--ranks", default=None, metavar="A:B",
                       help="schedule: the per-rank document of ranks A..B-1")
    p.add_argument("--kind", choices=["steps", "trees"], default="steps",
                   help="schedule: steps (step schedule) or trees (ForestColl tree-flow "
                        "schedule reaching T_B^FC, JSON)")
    p.add_argument("--collective", choices=[Collective.ALLGATHER, Collective.REDUCE_SCATTER,
                                            Collective.ALLREDUCE, Collective.ALLTOALL,
                                            Collective.BROADCAST],
                   default=Collective.ALLGATHER,
                   help="schedule: which collective (default allgather). Steps: reduce-scatter "
                        "is an allgather run backwards, allreduce is reduce-scatter then "
                        "allgather, alltoall is a k-step schedule of piece fractions from a "
                        "time-expanded LP (json only; its bandwidth time, steps and the LP "
                        "bound 1/f on stderr); broadcast (mscclpp only): the periodic "
                        "one-root schedule of score --collective broadcast from --root, "
                        "run for its largest lag + 1 batches. Trees: out-trees, in-trees, or "
                        "in-trees then out-trees, reported next to the allreduce tree optimum")
    p.add_argument("--root", type=int, default=0, metavar="R",
                   help="broadcast: the root rank (default 0)")
    p.add_argument("--steps", type=int, default=None, metavar="K",
                   help="alltoall: exactly K steps (>= the diameter; fewer steps cost less "
                        "latency, maybe more bandwidth time); default: the least bandwidth "
                        "time over diameter..diameter+2 steps")
    p.add_argument("--trees-per-root", type=int, default=None, metavar="K",
                   help="trees: best schedule with exactly K trees per root (fixed-k)")
    p.add_argument("--low-trees", action="store_true",
                   help="trees: prefer low trees (heuristic)")
    p.add_argument("--channels", type=int, default=1, metavar="K",
                   help="schedule xml, mscclpp: K channels' worth of parallelism per link "
                        "(default 1; mscclpp: K instances on K lanes of every link): "
                        "K instances, each moving 1/K of every chunk, or, where K instances "
                        "exceed the runtime's limits, one instance whose links deal their "
                        "messages in turn over K channels (said on stderr); --channel-mode "
                        "fixes one")
    p.add_argument("--channel-mode", choices=["auto", "instances", "interleave"],
                   default="auto",
                   help="schedule xml: how --channels K is given: instances, interleave "
                        "(one instance, each link's messages dealt in turn over K channels: "
                        "about 1/K of the XML elements K instances load), or auto (default: "
                        "instances where they fit)")
    p.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple",
                   help="schedule xml: MSCCL protocol (default Simple)")
    p.add_argument("--runtime", choices=["msccl-executor", "msccl"], default="msccl-executor",
                   help="schedule xml: the MSCCL runtime that loads it (coll spelling, maxBytes "
                        "rule, limits; default msccl-executor)")
    p.add_argument("--max-steps", type=int, default=None, metavar="K",
                   help="schedule xml: instructions per threadblock the runtime allows "
                        "(MSCCL_MAX_NUM_STEPS; default 64 for msccl-executor, 256 for msccl)")
    place = p.add_mutually_exclusive_group()
    place.add_argument("--in-place", "--inplace", dest="inplace", action="store_true",
                       default=False,
                       help="schedule xml, mscclpp: the in-place variant (NCCL's in-place "
                            "buffers)")
    place.add_argument("--out-of-place", dest="inplace", action="store_false",
                       help="schedule xml, mscclpp: the out-of-place variant (default)")
    p.add_argument("--min-bytes", type=int, default=0, metavar="BYTES",
                   help="schedule xml, mscclpp: smallest message size the runtime may pick it "
                        "for (allgather: the whole output; else the input)")
    p.add_argument("--max-bytes", type=int, default=None, metavar="BYTES",
                   help="schedule xml, mscclpp: largest message size it may be picked for "
                        "(default: xml unbounded; mscclpp the largest whose offsets fit 32 "
                        "bits)")
    p.add_argument("--gpus-per-node", type=int, default=1, metavar="G",
                   help="schedule mscclpp: ranks r with equal r // G share a server: memory "
                        "channels between them, port channels on the fabric's links, and G "
                        "is the plan's ranks per node (default 1)")
    add_workload(p, " of the stated prices and the Chakra network and trace", "schedule: ")
    p.add_argument("--step-overhead", default="0s", metavar="TIME",
                   help="schedule xml: the runtime's cost per instruction, stated apart from "
                        "the α-β time as TIME × most steps in one threadblock (default 0s: "
                        "msccl-executor-nccl publishes no figure; docs/formats.md)")
    p.add_argument("--tb-overhead", default="0s", metavar="TIME",
                   help="schedule xml: the runtime's cost per threadblock, stated as TIME × "
                        "most threadblocks on one rank (default 0s)")


def _announce(args):
    """For a schedule written to a file: print the size line export_schedule states before
    writing (none when the file's directory is missing: the write's own error line is the
    answer)."""
    if args.output in (None, "-") or not os.path.isdir(
            os.path.dirname(os.path.abspath(args.output))):
        return None
    return lambda line: print(f"{line}, writing {args.output}", file=sys.stderr)


def _state_price(price: dict) -> None:
    """One stderr line: the XML's shape, its replayed α-β time and the runtime overhead
    apart (:func:`topofinder.api.msccl_price`)."""
    print(f"MSCCL XML: {price['max_steps_per_tb']} steps in the fullest threadblock, "
          f"{price['max_tbs_per_rank']} threadblocks on the fullest rank "
          f"({price['threadblocks']} in all); replayed α-β time T_L·α + τ·M/B = "
          f"{price['time_s'] * 1e6:.6g} us (T_L = {price['T_L']}, τ = {price['tau']}) + "
          f"runtime overhead {price['overhead_s'] * 1e6:.6g} us ("
          f"{price['step_overhead_s'] * 1e6:g} us/step × {price['max_steps_per_tb']} + "
          f"{price['tb_overhead_s'] * 1e6:g} us/threadblock × {price['max_tbs_per_rank']})",
          file=sys.stderr)


def _run_chakra(args, renaming, workload) -> int:
    """--format chakra: the ASTRA-sim bundle in the directory -o, its prices on stderr."""
    if not args.output or args.output == "-" or renaming is not None:
        raise api.TopofinderError("export --format chakra writes a directory: give -o DIR "
                                  "(and no --relabel)")
    info = api.export_chakra(source(args), args.output, args.collective, workload,
                             kind=args.kind, low_trees=args.low_trees,
                             trees_per_root=args.trees_per_root)
    print(f"Chakra ET: {info['ranks']} ranks ({info['prefix']}.<rank>.et), {info['sends']} "
          f"sends, {info['bytes']} bytes, with workload.<rank>.et, system.json, network.yml, "
          f"remote_memory.json in {info['directory']}; {_prices(info)}", file=sys.stderr)
    return 0


def _prices(price: dict) -> str:
    timed = ("not timed (beyond the replay limit)" if price["async_s"] is None
             else f"{price['async_s'] * 1e6:.6g} us")
    return f"lock-step {price['time_s'] * 1e6:.6g} us, dependency-driven {timed}"
def _state_plan(price: dict) -> None:
    """One stderr line: the MSCCL++ plan's shape and its replayed α-β time
    (:func:`topofinder.api.mscclpp_price`)."""
    print(f"MSCCL++ plan: {price['max_ops_per_threadblock']} ops in the fullest threadblock, "
          f"{price['max_threadblocks_per_rank']} threadblocks on the fullest rank "
          f"({price['threadblocks']} in all), messages up to {price['max_message_bytes']:,} "
          f"bytes (multiples of {16 * price['message_chunks']:,}; 32-bit offsets); " + (
              f"{price['T_L']} steps" if price["root"] is not None else
              f"replayed α-β time T_L·α + τ·M/B = {price['time_s'] * 1e6:.6g} us (T_L = "
              f"{price['T_L']}, τ = {price['tau']})"), file=sys.stderr)


def run(args, renaming=None) -> int:
    """Build, rename and write the schedule; one stderr line states both prices (lock-step
    and dependency-driven); for all-to-all it compares its bandwidth time Σ_t max-load
    (units of (M/N)/b) with the LP bound 1/f."""
    # bad figures refused before anything is written
    workload = api.Workload.from_strings(args.alpha, args.bandwidth, args.size)
    if args.format == "chakra":
        return _run_chakra(args, renaming, workload)
    start = time.perf_counter()
    if args.rank is not None or args.ranks is not None:
        if args.kind != "steps":
            raise TopofinderError("export --rank: no per-rank tree schedule: ForestColl's "
                                  "trees of fractional weight span all ranks; export it whole")
        if renaming is not None:
            raise TopofinderError("export --rank: a per-rank document names ranks as the "
                                  "expression numbers them, without --relabel")
        block = api.rank_block(args.rank, args.ranks)
        doc = api.export_rank_schedule(source(args), block, args.collective,
                                       args.format or "json", args.output or "-")
        if args.output not in (None, "-"):
            print(f"ranks {block[0]}..{block[1] - 1} of {doc['topology']}: "
                  f"{len(doc['sends'])} sends, {len(doc['receives'])} receives, "
                  f"{time.perf_counter() - start:.2f} s", file=sys.stderr)
        return 0
    xml = dict(channels=args.channels, protocol=args.protocol, runtime=args.runtime,
               inplace=args.inplace, max_steps=args.max_steps, min_bytes=args.min_bytes,
               max_bytes=args.max_bytes,
               interleave={"auto": None, "instances": False,
                           "interleave": True}[args.channel_mode],
               note=lambda line: print(line, file=sys.stderr))
    priced, broadcast = None, []
    if args.format == "xml":
        per_step, per_tb = (api.Workload.from_strings(alpha=x).alpha_s     # times, as α is
                            for x in (args.step_overhead, args.tb_overhead))

        def priced(steps, text, shape):
            _state_price(api.msccl_price(steps, text, workload, shape=shape,
                                         step_overhead=per_step,
                                         tb_overhead=per_tb))
    if args.format == "mscclpp":
        xml = dict(channels=args.channels, inplace=args.inplace, min_bytes=args.min_bytes,
                   max_bytes=args.max_bytes, gpus_per_node=args.gpus_per_node)
        if args.collective == Collective.BROADCAST:
            xml["root"] = args.root

        def priced(steps, shape):
            _state_plan(api.mscclpp_price(steps, shape, workload))
            if args.collective == Collective.BROADCAST:
                broadcast.append(api.broadcast_price(steps, workload))
    schedule, _ = api.export_schedule_of(
        source(args), args.format or "json", args.output or "-", collective=args.collective,
        kind=args.kind, low_trees=args.low_trees, trees_per_root=args.trees_per_root,
        steps=args.steps, relabel=renaming, announce=_announce(args), priced=priced, **xml)
    price = broadcast[0] if broadcast else api.schedule_price(schedule, workload)
    prices = _prices(price)
    if args.collective == Collective.ALLTOALL:
        print(f"all-to-all schedule of {schedule.topology.expr}: {schedule.num_steps} steps, "
              f"bandwidth time {schedule.bandwidth_time:.6g} (M/N)/b, LP bound 1/f = "
              f"{schedule.bound:.6g}, gap {schedule.gap:.2e}, {schedule.num_sends} sends, "
              f"{time.perf_counter() - start:.1f} s; {prices}", file=sys.stderr)
    else:
        print(f"price of {price['expr']}'s {price['collective']} for the workload: {prices}",
              file=sys.stderr)
    return 0
