"""The MSCCL runtimes' limits: msccl-executor (Azure/msccl-executor-nccl,
``src/misc/msccl/msccl_parser.cc``, ``src/include/msccl/msccl_struct.h``,
``src/include/msccl/msccl_parser.h``) and the older microsoft/msccl (``src/graph/topo.cc``,
``src/include/msccl.h``, ``src/graph/xml.h``): what their XML parsers load per rank, as the
table :data:`RUNTIMES` the writer's fit checks (:mod:`topofinder.export.msccl.fit`) and the
checker (:mod:`topofinder.export.msccl.rules`) share; the writer's protocols; the checker's
errors."""

from __future__ import annotations

from dataclasses import dataclass, field

from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective

PROTOCOLS = ("Simple", "LL", "LL128")


@dataclass(frozen=True)
class Runtime:
    """Parser limits of one MSCCL runtime (file references in the module doc)."""
    name: str
    max_steps: int            # MSCCL_MAX_NUM_STEPS: step index s must be below it
    max_tbs: int              # MSCCL_MAX_NUM_THREAD_BLOCKS: tb id must be below it
    max_tbs_per_channel: int  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL (send / recv peers)
    max_count: int            # MSCCL_MAX_COUNT: cnt must be below it
    max_channels: int         # MAXCHANNELS
    max_nodes: int            # MAX_NODES: XML elements the loader keeps per rank
    max_subs: int             # MAX_SUBS: children per element (not checked by the parser)
    max_attrs: int            # MAX_ATTR_COUNT
    max_str: int              # MAX_STR_LEN
    colls: dict = field(default_factory=dict)   # collective → spelling of coll
    max_bytes_zero_unbounded: bool = True


RUNTIMES = {
    "msccl-executor": Runtime("msccl-executor", 64, 32 * 32, 32, 72, 32, 4096, 1024, 16, 255,
                              {Collective.ALLGATHER: Collective.ALLGATHER,
                               Collective.REDUCE_SCATTER: "reducescatter",
                               Collective.ALLREDUCE: Collective.ALLREDUCE}, True),
    "msccl": Runtime("msccl", 256, 216, 32, 72, 32, 4096, 1024, 16, 255,
                     {Collective.ALLGATHER: Collective.ALLGATHER,
                      Collective.REDUCE_SCATTER: "reduce_scatter",
                      Collective.ALLREDUCE: Collective.ALLREDUCE}, False),
}
INT16_MAX, INT8_MAX = 32767, 127


class MscclCheckError(TopofinderError):
    """An XML a runtime would refuse, or a run that does not compute the collective."""


class MscclDeadlock(MscclCheckError):
    """No threadblock can progress before the program ends."""


def get_runtime(name: str) -> Runtime:
    if name not in RUNTIMES:
        raise TopofinderError(f"runtime {name!r}: accepted are {', '.join(RUNTIMES)}")
    return RUNTIMES[name]
