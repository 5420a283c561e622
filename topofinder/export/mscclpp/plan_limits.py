"""The executor's compile-time limits, checked on a parsed plan, and the plan's shape figures.

Constants from microsoft/mscclpp ``src/core/include/execution_common.hpp``: MAX_OPERATION = 64
ops per threadblock (``executor.cc`` ``setupDeviceExecutionPlan`` counts a pipeline and its
body, as ``setupOperations`` flattens them), MAX_CHANNEL = 16 channels of each type per
threadblock (``Channels``) and 16 remote buffers of each access type (``RemoteBuffers``),
MAX_CHANNEL_PER_OPERATION = 8 channels per op, MAX_LOCAL_BUFFER_PER_OPERATION + 8 = 10 buffer
references per side, MAX_DEVICE_SYNCERS = 16 barrier ids, MAX_DEVICE_SEMAPHORES = 16 semaphore
ids per op. Offsets and sizes are ``uint32_t`` in ``Operation``; packet ops double them in
``execution_kernel.hpp`` (``dstOffset << 1``) and add ``scratchOffset_`` (half the scratch buffer
when ``use_double_scratch_buffer``), so the largest message whose every byte offset fits 32 bits
follows from the plan. ``handlePipeline`` keeps the iteration count (chunks × chunk size /
``unit_size``) in ``uint16_t``, which bounds the chunk size too. The
kernel's threadblocks spin on each other (signal/wait, barriers, packets), so all of a rank's
threadblocks must be resident at once: at most ``max_threadblocks`` (the GPU's SMs at one
1024-thread block per SM, ``__launch_bounds__(1024, 1)``; 132 on an H100 SXM).
"""

from __future__ import annotations

from dataclasses import dataclass

from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective

from .plan_parse import Op, Plan

MAX_OPERATION = 64
MAX_CHANNEL = 16
MAX_CHANNEL_PER_OPERATION = 8
MAX_BUFFERS_PER_OPERATION = 2 + 8
MAX_DEVICE_SYNCERS = 16
MAX_DEVICE_SEMAPHORES = 16
H100_SMS = 132
U32 = 2 ** 32 - 1
U16 = 2 ** 16 - 1
#: Ops whose buffer offsets the kernel doubles (packet layout in the scratch buffer).
PACKET_DST = frozenset({"ppkt", "rppkt", "cpkt", "gstorepkt"})
PACKET_SRC = frozenset({"rppkt", "upkt", "gstorepkt"})
PACKET_SRC_TAIL = frozenset({"respkt", "repkt", "recspkt", "recpkt"})   # src[1:] are packets
PACKET_DST_TAIL = frozenset({"respkt", "recspkt"})                       # dst[1:] are packets


@dataclass
class Shape:
    """Figures of a plan: ops in the fullest threadblock, threadblocks per rank (largest),
    channels of each type in the fullest threadblock, channels per op, and the byte range of
    message sizes whose offsets all fit 32 bits (``max_message_bytes`` 0 if none does)."""

    max_ops_per_threadblock: int
    max_threadblocks_per_rank: int
    max_memory_channels_per_threadblock: int
    max_port_channels_per_threadblock: int
    max_channels_per_op: int
    memory_channels: int
    port_channels: int
    chunk_span: int
    max_message_bytes: int


def flat_ops(ops: list[Op]):
    """Ops as the executor stores them: each pipeline followed by its body."""
    for op in ops:
        yield op
        yield from op.body


def _span(plan: Plan, op: Op) -> int:
    """Largest multiple of the chunk size an offset/size of ``op`` reaches, in bytes/chunk."""
    dbl = 0
    if plan.double_scratch:
        dbl = max(g.scratch_chunks for g in plan.gpus) * (2 if plan.packets else 1)
    worst = 0
    for side, refs in (("src", op.src), ("dst", op.dst)):
        for k, ref in enumerate(refs):
            end = ref.index + ref.size
            packet = ((side == "dst" and (op.name in PACKET_DST
                                          or (k >= 1 and op.name in PACKET_DST_TAIL)))
                      or (side == "src" and (op.name in PACKET_SRC
                                             or (k >= 1 and op.name in PACKET_SRC_TAIL))))
            worst = max(worst, 2 * end + dbl if packet else end)
    return worst


def check_limits(plan: Plan, max_threadblocks: int = H100_SMS) -> Shape:
    """Refuse (one line, with the figure) what exceeds a limit; return the shape."""
    if not isinstance(max_threadblocks, int) or max_threadblocks < 1:
        raise TopofinderError("max_threadblocks must be a positive integer")
    worst_ops = worst_tbs = worst_mem = worst_port = worst_per_op = span = 0
    pipe_chunk = None        # largest chunk size whose pipeline iterations fit uint16_t
    for g in plan.gpus:
        if len(g.threadblocks) > max_threadblocks:
            raise TopofinderError(
                f"MSCCL++ plan: rank {g.rank} has {len(g.threadblocks)} threadblocks, more "
                f"than the {max_threadblocks} that can be resident at once (they spin-wait on "
                "each other)")
        worst_tbs = max(worst_tbs, len(g.threadblocks))
        for tb in g.threadblocks:
            where = f"rank {g.rank} threadblock {tb.id}"
            ops = list(flat_ops(tb.ops))
            if len(ops) > MAX_OPERATION:
                raise TopofinderError(
                    f"MSCCL++ plan: {where} has {len(ops)} ops (pipeline bodies counted), more "
                    f"than MAX_OPERATION = {MAX_OPERATION}")
            worst_ops = max(worst_ops, len(ops))
            for ctype in ("memory", "port", "switch"):
                if len(tb.channels[ctype]) > MAX_CHANNEL:
                    raise TopofinderError(
                        f"MSCCL++ plan: {where} has {len(tb.channels[ctype])} {ctype} channels, "
                        f"more than MAX_CHANNEL = {MAX_CHANNEL}")
            for ctype in ("memory", "port"):
                if len(tb.remote_refs[ctype]) > MAX_CHANNEL:
                    raise TopofinderError(
                        f"MSCCL++ plan: {where} has {len(tb.remote_refs[ctype])} {ctype} remote "
                        f"buffer refs, more than MAX_CHANNEL = {MAX_CHANNEL}")
            worst_mem = max(worst_mem, len(tb.channels["memory"]))
            worst_port = max(worst_port, len(tb.channels["port"]))
            for op in ops:
                _check_op(plan, g, tb, op)
                worst_per_op = max(worst_per_op, len(op.channel_ids))
                span = max(span, _span(plan, op))
                if op.name == "pipeline" and op.num_chunks:
                    bound = U16 * op.unit_size // op.num_chunks
                    pipe_chunk = bound if pipe_chunk is None else min(pipe_chunk, bound)
    chunks = max((g.output_chunks if plan.collective == Collective.ALLGATHER else g.input_chunks)
                 for g in plan.gpus)
    max_msg = 0
    if span:
        chunk_bytes = U32 // span
        if pipe_chunk is not None:
            chunk_bytes = min(chunk_bytes, pipe_chunk)
        max_msg = chunk_bytes // plan.alignment * plan.alignment * chunks
    if plan.min_message > min(max_msg, plan.max_message):
        raise TopofinderError(
            f"MSCCL++ plan: min_message_size {plan.min_message} exceeds "
            f"{min(max_msg, plan.max_message)} bytes, the largest message it can serve "
            f"(offsets reach {span} chunk sizes and must fit 32 bits)")
    max_msg = min(max_msg, plan.max_message)
    return Shape(worst_ops, worst_tbs, worst_mem, worst_port, worst_per_op,
                 sum(len(g.channels["memory"]) for g in plan.gpus),
                 sum(len(g.channels["port"]) for g in plan.gpus), span, max_msg)


def _check_op(plan: Plan, g, tb, op: Op) -> None:
    where = op.where
    if len(op.channel_ids) > MAX_CHANNEL_PER_OPERATION:
        raise TopofinderError(
            f"MSCCL++ plan: {where} uses {len(op.channel_ids)} channels, more than "
            f"MAX_CHANNEL_PER_OPERATION = {MAX_CHANNEL_PER_OPERATION}")
    for side in (op.src, op.dst):
        if len(side) > MAX_BUFFERS_PER_OPERATION:
            raise TopofinderError(
                f"MSCCL++ plan: {where} has {len(side)} buffers on one side, more than "
                f"{MAX_BUFFERS_PER_OPERATION}")
    if op.channel_ids and op.channel_type in ("memory", "port", "switch"):
        have = len(tb.channels[op.channel_type])
        for c in op.channel_ids:
            if c >= have:
                raise TopofinderError(
                    f"MSCCL++ plan: {where} uses {op.channel_type} channel {c} but the "
                    f"threadblock holds {have}")
    if len(op.channel_ids) > plan.threads:
        raise TopofinderError(f"MSCCL++ plan: {where}: {len(op.channel_ids)} channels but "
                              f"{plan.threads} threads (one thread serves each)")
    if op.barrier_id is not None and op.barrier_id >= MAX_DEVICE_SYNCERS:
        raise TopofinderError(f"MSCCL++ plan: {where}: barrier_id {op.barrier_id} >= "
                              f"MAX_DEVICE_SYNCERS = {MAX_DEVICE_SYNCERS}")
    if op.name == "barrier" and not 1 <= op.num_threadblocks <= len(g.threadblocks):
        raise TopofinderError(f"MSCCL++ plan: {where}: num_threadblocks {op.num_threadblocks} "
                              f"not in [1, {len(g.threadblocks)}]")
    if len(op.semaphore_ids) > MAX_DEVICE_SEMAPHORES:
        raise TopofinderError(f"MSCCL++ plan: {where}: {len(op.semaphore_ids)} semaphores, "
                              f"more than MAX_DEVICE_SEMAPHORES = {MAX_DEVICE_SEMAPHORES}")
    for s in op.semaphore_ids:
        if s >= len(g.semaphores):
            raise TopofinderError(f"MSCCL++ plan: {where}: semaphore {s} but rank {g.rank} "
                                  f"declares {len(g.semaphores)}")
    if op.name == "pipeline" and op.num_chunks > U16:
        raise TopofinderError(f"MSCCL++ plan: {where}: pipeline over {op.num_chunks} chunks: "
                              f"at least that many iterations, more than uint16_t holds ({U16})")
    if op.name == "pipeline" and len(op.body) + 1 > 255:
        raise TopofinderError(f"MSCCL++ plan: {where}: pipeline of {len(op.body)} ops "
                              "(nSteps is uint8_t)")
