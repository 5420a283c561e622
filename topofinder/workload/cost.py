"""Workload cost model (docs/model.md, paper 001 §3): α-β times and the choice of a frontier point.

Units at the command line: sizes in B/KB/MB/GB (powers of 1024 bytes; KiB/MiB/GiB accepted as
the same), bandwidth in bps/Kbps/Mbps/Gbps/Tbps (powers of 1000 bits per second; GBps/GB/s are
bytes), latency in s/ms/us/µs/ns. Internally: seconds, bytes, bytes per second.

Allreduce of M bytes takes 2·(T_L·α + τ·M/B) (reduce-scatter + allgather, Appendix B);
all-to-all with M bytes per node takes (M/N)/(f·b) with b = B/d the link bandwidth and f the
maximum concurrent flow at link capacity 1 (docs/algorithms.md); a one-root broadcast of M
bytes in steady state takes M/(TP·b), TP the exact steady-state throughput in unit messages per
unit time (paper 003; topofinder.workload.broadcast).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective

_SIZE_UNITS = {"b": 1, "kb": 1024, "mb": 1024 ** 2, "gb": 1024 ** 3, "tb": 1024 ** 4,
               "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4}
_TIME_UNITS = {"min": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_BIT_RATE_UNITS = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12,
                   "b/s": 1, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12}
_BYTE_RATE_UNITS = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}
#: Largest number accepted in a size, time, bandwidth or weight (before its unit): results stay
#: finite, so every JSON output is strict JSON.
MAX_QUANTITY = 1e30
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-zµμ/]*)\s*$")


def _split(text: str, what: str, accepted: str) -> tuple[float, str]:
    m = _QUANTITY.match(str(text))
    if not m:
        raise TopofinderError(f"{what} {text!r} is not a number with a unit; accepted: {accepted}")
    value = float(m.group(1))
    if not math.isfinite(value) or value > MAX_QUANTITY:
        raise TopofinderError(f"{what} {text!r} is too large (at most {MAX_QUANTITY:g} in any "
                              f"unit)")
    return value, m.group(2)


def parse_size(text: str) -> float:
    """Bytes from '1MB', '512KB', '1.5GB', '4096' (plain bytes)."""
    accepted = "B, KB, MB, GB, TB (powers of 1024 bytes), e.g. 1MB"
    value, unit = _split(text, "size", accepted)
    factor = 1 if unit == "" else _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise TopofinderError(f"size {text!r}: unknown unit {unit!r}; accepted: {accepted}")
    if value <= 0:
        raise TopofinderError(f"size {text!r} must be positive")
    return value * factor


def parse_time(text: str) -> float:
    """Seconds from '10us', '10µs', '1.5ms', '2e-6s'."""
    accepted = "s, ms, us (or µs), ns, e.g. 10us"
    value, unit = _split(text, "latency", accepted)
    factor = _TIME_UNITS.get(unit) or _TIME_UNITS.get(unit.lower())
    if factor is None:
        raise TopofinderError(f"latency {text!r}: unknown unit {unit!r}; accepted: {accepted}")
    if value < 0:
        raise TopofinderError(f"latency {text!r} must not be negative")
    return value * factor


def parse_bandwidth(text: str) -> float:
    """Bytes per second from '100Gbps', '400Gb/s' (bits) or '50GBps', '50GB/s' (bytes)."""
    accepted = "bps, Kbps, Mbps, Gbps, Tbps (bits/s, powers of 1000) or GBps/GB/s (bytes/s)"
    value, unit = _split(text, "bandwidth", accepted)
    if value <= 0:
        raise TopofinderError(f"bandwidth {text!r} must be positive")
    if unit.endswith(("Bps", "B/s")) and not unit.lower() == "bps":
        factor = _BYTE_RATE_UNITS.get(unit.replace("B/s", "bps").replace("Bps", "bps").lower())
        if factor is not None:
            return value * factor
    factor = _BIT_RATE_UNITS.get(unit.lower())
    if factor is None:
        raise TopofinderError(f"bandwidth {text!r}: unknown unit {unit!r}; accepted: {accepted}")
    return value * factor / 8


def parse_size_profile(text: str) -> list[tuple[float, float]]:
    """'1MB' or a weighted list '1MB:0.7,64MB:0.3' → [(bytes, weight), ...], weights summing
    to 1 after normalisation (a DDP bucket profile, for instance)."""
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise TopofinderError("size: give a size such as 1MB or a list such as 1MB:0.7,64MB:0.3")
    profile = []
    for part in parts:
        size, _, weight = part.partition(":")
        w = 1.0 if not weight else _positive_float(weight, f"weight of {size.strip()}")
        profile.append((parse_size(size), w))
    total = sum(w for _, w in profile)
    return [(s, w / total) for s, w in profile]


def _positive_float(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TopofinderError(f"{what}: {text!r} is not a number") from None
    if not value > 0 or not math.isfinite(value) or value > MAX_QUANTITY:
        raise TopofinderError(f"{what} must be a positive number up to {MAX_QUANTITY:g}, "
                              f"got {text}")
    return value


@dataclass(frozen=True)
class Workload:
    """α (s), node bandwidth B (bytes/s), allreduce size profile [(bytes, weight)], and the
    shares of the objective given to all-to-all of the same per-node sizes and to a one-root
    broadcast of the same sizes (each 0..1, together at most 1; allreduce gets the rest)."""

    alpha_s: float = 10e-6
    bandwidth_Bps: float = 100e9 / 8
    sizes: tuple[tuple[float, float], ...] = ((1024.0 ** 2, 1.0),)
    alltoall_share: float = 0.0
    labels: dict = field(default_factory=dict, compare=False)
    broadcast_share: float = 0.0

    @classmethod
    def from_strings(cls, alpha="10us", bandwidth="100Gbps", size="1MB",
                     alltoall_share: float | str = 0.0,
                     broadcast_share: float | str = 0.0) -> "Workload":
        share = _share(alltoall_share, "all-to-all")
        bshare = _share(broadcast_share, Collective.BROADCAST)
        if share + bshare > 1.0:
            raise TopofinderError(f"the all-to-all and broadcast shares add up to "
                                  f"{share + bshare:g}; together they must be at most 1")
        return cls(parse_time(alpha), parse_bandwidth(bandwidth),
                   tuple(parse_size_profile(size)), share,
                   {"alpha": alpha, "bandwidth": bandwidth, "size": size}, bshare)

    def allreduce_time(self, t_l: float, tau: float) -> float:
        """Expected allreduce seconds 2·(T_L·α + τ·M/B) over the size profile."""
        return sum(w * 2.0 * (t_l * self.alpha_s + tau * m / self.bandwidth_Bps)
                   for m, w in self.sizes)

    def collective_time(self, t_l: float, tau: float) -> float:
        """Expected seconds T_L·α + τ·M/B of one schedule over the size profile (an allreduce
        schedule's T_L and τ already add both phases)."""
        return sum(w * (t_l * self.alpha_s + tau * m / self.bandwidth_Bps)
                   for m, w in self.sizes)

    def alltoall_time(self, n: int, d: int, f: float | None) -> float | None:
        """Expected all-to-all seconds (M/N)/(f·b), b = B/d, over the size profile."""
        if f is None or f <= 0:
            return None
        b = self.bandwidth_Bps / d
        return sum(w * (m / n) / (f * b) for m, w in self.sizes)

    def broadcast_time(self, d: int, tp: Fraction | None) -> float | None:
        """Expected steady-state broadcast seconds M/(TP·b), b = B/d, over the size profile
        (paper 003: K messages take K/TP unit times asymptotically)."""
        if tp is None or tp <= 0:
            return None
        return float(Fraction(sum(w * m for m, w in self.sizes)) * d
                     / (Fraction(self.bandwidth_Bps) * tp))

    def objective(self, allreduce_s: float, alltoall_s: float | None,
                  broadcast_s: float | None = None) -> float:
        """The time a point is ranked by: allreduce, mixed with all-to-all and broadcast by
        their shares (a part without a time is left out, its share going to allreduce)."""
        a = self.alltoall_share if alltoall_s is not None else 0.0
        c = self.broadcast_share if broadcast_s is not None else 0.0
        if a == 0.0 and c == 0.0:
            return allreduce_s
        return ((1.0 - a - c) * allreduce_s + (a * alltoall_s if a else 0.0)
                + (c * broadcast_s if c else 0.0))

    def describe(self) -> dict:
        return {"alpha_s": self.alpha_s, "bandwidth_Bps": self.bandwidth_Bps,
                "sizes": [{"bytes": m, "weight": w} for m, w in self.sizes],
                "alltoall_share": self.alltoall_share,
                **({"broadcast_share": self.broadcast_share} if self.broadcast_share else {}),
                **{k: str(v) for k, v in self.labels.items()}}


def _share(text, what: str) -> float:
    """A share of the objective: a number in [0, 1]."""
    try:
        share = float(text)
    except (TypeError, ValueError):
        share = float("nan")
    if not 0.0 <= share <= 1.0:
        raise TopofinderError(f"{what} share must be a number in [0, 1] (e.g. 0.3), got "
                              f"{text!r}")
    return share
