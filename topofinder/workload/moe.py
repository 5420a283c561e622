"""Expert-parallel (MoE) training iteration model (paper 001 §8.4, Appendix A.4, Fig. 9, 16).

A workload file (TOML)::

    [network]                 # optional; else --alpha / --bandwidth
    alpha = "10us"
    bandwidth = "100Gbps"

    [compute]                 # per iteration, one node
    forward = "60ms"
    backward = "120ms"

    [allreduce]               # data-parallel gradients of the non-expert layers
    buckets = ["25MB", "25MB", "10MB"]   # in the order backward produces them
    overlap = true            # PyTorch DDP: buckets overlap backward compute

    [alltoall]                # expert-parallel token exchange
    size = "8MB"              # bytes one node sends per all-to-all (size/N to each node)
    count = 48                # all-to-alls per iteration (2 per MoE layer, fwd and bwd)

Timeline (Appendix A.4): all-to-alls block the compute stream and never overlap an allreduce,
so they add in full; the communication stream runs one collective at a time; bucket i is ready
when the backward compute has produced the fraction (bytes of buckets 1..i)/(all bucket
bytes) of the gradients, and starts at max(ready_i, end of bucket i−1). The allreduce time
left after backward compute ends is the unoverlapped allreduce. Iteration time = compute +
unoverlapped allreduce + all-to-all, the split of Fig. 9. Without overlap every bucket is
unoverlapped. A bucket of M bytes costs 2·(T_L·α + τ·M/B) (the point's allreduce schedule);
an all-to-all of M bytes per node costs (M/N)/(f·B/d) at the certified flow f.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from topofinder.errors import TopofinderError
from topofinder.model.inputs import read_input
from topofinder.workload.cost import parse_bandwidth, parse_size, parse_time
from topofinder.model.collectives import Collective

_SECTIONS = {"network": {"alpha", "bandwidth"}, "compute": {"forward", "backward"},
             Collective.ALLREDUCE: {"buckets", "overlap"}, Collective.ALLTOALL: {"size", "count"},
             "source": None}


@dataclass(frozen=True)
class MoEWorkload:
    """Per-iteration compute (s), allreduce buckets (bytes, in production order), overlap,
    per-node all-to-all size (bytes) and count; α (s) and B (bytes/s) when the file sets
    them (else None: the command line's)."""

    forward_s: float
    backward_s: float
    buckets: tuple[float, ...]
    overlap: bool
    alltoall_bytes: float
    alltoall_count: int
    alpha_s: float | None = None
    bandwidth_Bps: float | None = None
    path: str = ""

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s

    def describe(self) -> dict:
        return {"file": self.path, "forward_s": self.forward_s, "backward_s": self.backward_s,
                "buckets_bytes": list(self.buckets), "overlap": self.overlap,
                "alltoall_bytes": self.alltoall_bytes, "alltoall_count": self.alltoall_count}

    def iteration(self, allreduce_s, alltoall_s) -> dict:
        """The iteration split for one topology: ``allreduce_s(M)`` seconds of one allreduce
        of M bytes, ``alltoall_s(M)`` of one all-to-all of M bytes per node (None: unknown)."""
        a2a_one = alltoall_s(self.alltoall_bytes) if self.alltoall_count else 0.0
        a2a = None if a2a_one is None else self.alltoall_count * a2a_one
        unoverlapped = unoverlapped_allreduce(self.buckets, [allreduce_s(m) for m in self.buckets],
                                              self.backward_s, self.overlap)
        total = None if a2a is None else self.compute_s + unoverlapped + a2a
        return {"compute_s": self.compute_s, "allreduce_unoverlapped_s": unoverlapped,
                "allreduce_total_s": sum(allreduce_s(m) for m in self.buckets),
                "alltoall_s": a2a, "iteration_s": total}


def unoverlapped_allreduce(sizes, times, backward_s: float, overlap: bool) -> float:
    """Seconds of allreduce after backward compute ends (Appendix A.4, DDP buckets): bucket i
    ready at backward_s · (Σ_{j≤i} sizes_j)/Σ sizes, run one at a time in order."""
    if not overlap:
        return float(sum(times))
    total = float(sum(sizes))
    end, produced = 0.0, 0.0
    for m, t in zip(sizes, times):
        produced += m
        ready = backward_s * produced / total
        end = max(end, ready) + t
    return max(0.0, end - backward_s)


def _fail(path, message: str):
    raise TopofinderError(f"workload {path}: {message}")


def load_moe(path: str | Path) -> MoEWorkload:
    """Read and check a MoE workload TOML file; any problem is one TopofinderError line."""
    p = Path(path)
    try:
        doc = tomllib.loads(read_input(p, "workload"))
    except OSError as exc:
        _fail(path, f"cannot read it ({exc.strerror or exc})")
    except UnicodeDecodeError:
        _fail(path, "is not UTF-8 text")
    except tomllib.TOMLDecodeError as exc:
        _fail(path, f"is not valid TOML ({exc})")
    for key, value in doc.items():
        if key not in _SECTIONS:
            _fail(path, f"unknown section [{key}] (accepted: network, compute, allreduce, "
                        f"alltoall)")
        allowed = _SECTIONS[key]
        if allowed is None:
            continue
        if not isinstance(value, dict):
            _fail(path, f"{key} must be a [{key}] table")
        for k in value:
            if k not in allowed:
                _fail(path, f"unknown key {k!r} in [{key}] (accepted: {', '.join(sorted(allowed))})")
    for needed in ("compute", Collective.ALLREDUCE, Collective.ALLTOALL):
        if needed not in doc:
            _fail(path, f"missing section [{needed}]")

    def get(section, key, parse, default=None):
        value = doc.get(section, {}).get(key, default)
        if value is None:
            _fail(path, f"missing {key} in [{section}]")
        try:
            return parse(str(value))
        except TopofinderError as exc:
            _fail(path, f"[{section}] {key}: {exc}")

    buckets = doc[Collective.ALLREDUCE].get("buckets")
    if not isinstance(buckets, list) or not buckets:
        _fail(path, "[allreduce] buckets must be a non-empty list of sizes such as [\"25MB\"]")
    try:
        sizes = tuple(parse_size(str(b)) for b in buckets)
    except TopofinderError as exc:
        _fail(path, f"[allreduce] buckets: {exc}")
    overlap = doc[Collective.ALLREDUCE].get("overlap", True)
    if not isinstance(overlap, bool):
        _fail(path, "[allreduce] overlap must be true or false")
    count = doc[Collective.ALLTOALL].get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        _fail(path, "[alltoall] count must be a whole number >= 0")
    net = doc.get("network", {})
    return MoEWorkload(
        forward_s=get("compute", "forward", parse_time),
        backward_s=get("compute", "backward", parse_time),
        buckets=sizes, overlap=overlap,
        alltoall_bytes=get(Collective.ALLTOALL, "size", parse_size), alltoall_count=count,
        alpha_s=get("network", "alpha", parse_time) if "alpha" in net else None,
        bandwidth_Bps=get("network", "bandwidth", parse_bandwidth) if "bandwidth" in net
        else None,
        path=str(path))
