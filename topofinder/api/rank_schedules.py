"""Per-rank schedules (docs/formats.md, "Per-rank schedule"): `export EXPR --what schedule
--rank R` / ``--ranks A:B`` writes one block of ranks' sends and receives at any N
(topofinder.finder.per_rank); `check PLAN R0.json R1.json ...` checks a set of them together
(topofinder.cabling.rank_check)."""

from __future__ import annotations

import io
import os

import numpy as np

from topofinder.api.topology import Source, emit, recipe
from topofinder.cabling.check import CheckReport, apply_diff, check
from topofinder.cabling.patch_panel import PatchPlan, read_plan
from topofinder.cabling.rank_check import combined_sends, is_rank_document
from topofinder.compute.output import write_bytes
from topofinder.errors import TopofinderError
from topofinder.finder.per_rank import check_collective, rank_document
from topofinder.model.collectives import Collective
from topofinder.model.schedule import dumps_document


def rank_block(rank: int | None, ranks: str | None) -> list[int] | tuple[int, int]:
    """The ranks of ``--rank R`` or ``--ranks A:B`` (A..B−1) as (first, stop)."""
    if (rank is None) == (ranks is None):
        raise TopofinderError("export: give one of --rank R and --ranks A:B")
    if rank is not None:
        if rank < 0:
            raise TopofinderError(f"export --rank: a rank is >= 0, got {rank}")
        return rank, rank + 1
    parts = str(ranks).split(":")
    try:
        a, b = (int(x) for x in parts)
    except ValueError:
        raise TopofinderError(f"export --ranks {ranks}: give A:B, ranks A..B-1") from None
    if not 0 <= a < b:
        raise TopofinderError(f"export --ranks {ranks}: need 0 <= A < B")
    return a, b


def export_rank_schedule(source: Source, block: tuple[int, int],
                         collective: str = Collective.ALLGATHER, fmt: str = "json",
                         path: str | os.PathLike | None = None) -> dict:
    """The per-rank document of ranks block[0]..block[1]−1 of the schedule `export` writes for
    ``source`` (an expression), written to ``path`` as json or npz (npz needs a path).
    Returns the document (its rows as arrays)."""
    check_collective(collective)
    named = recipe(source)
    if named is None:
        raise TopofinderError("export --rank: give a topology expression (the per-rank "
                              "export follows how search builds its schedule)")
    if fmt not in ("json", "npz"):
        raise TopofinderError(f"export --rank: format json or npz, not {fmt}")
    if fmt == "npz" and path in (None, "-"):
        raise TopofinderError("export --rank --format npz needs -o FILE.npz")
    doc = rank_document(named, np.arange(*block), collective)
    if fmt == "json":
        emit(dumps_document(doc, "\n"), path)
    else:
        arrays = {k: (v if isinstance(v, np.ndarray) else np.array(v))
                  for k, v in doc.items() if k not in ("columns",)}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        write_bytes(path, buffer.getvalue())           # whole or not at all
    return doc


def check_rank_schedules(plan: PatchPlan, paths, diff=None) -> CheckReport:
    """Check per-rank files together: each is well formed, no rank is in two files, every
    send of a file to a rank of another file is that file's receive and the other way round,
    and every send rides a fibre of the plan (topofinder.cabling.check)."""
    plan = plan if isinstance(plan, PatchPlan) else read_plan(plan)
    if diff is not None:
        plan = apply_diff(plan, diff)
    return check(plan, combined_sends(paths))


__all__ = ["rank_block", "export_rank_schedule", "check_rank_schedules", "is_rank_document"]
