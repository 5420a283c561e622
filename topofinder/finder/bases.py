"""Which base topologies exist at a given size and degree (paper 001 Table 9, docs/algorithms.md).

`base_expressions(n, k)` lists the expressions of every registered family
(topofinder.families.registry) and catalog entry with exactly n nodes and out-degree k. The
finder scores them and expands them; nothing here scores anything.
"""

from __future__ import annotations

from functools import lru_cache

from topofinder.families.catalog import entries
from topofinder.families.registry import base_instances


def base_expressions(n: int, k: int, at_target: bool = False) -> list[tuple[str, str]]:
    """(expression, schedule source) pairs of the bases with n nodes and degree k; source is
    "bfb" (score with BFB: every registered family's instances) or "catalog" (a search-found
    catalog entry with its stored schedule). ``at_target``: the final (N, d), where large
    rings are kept as BW-optimal fall-backs."""
    pairs = [(expr, "bfb") for expr in base_instances(n, k, at_target)]
    pairs += [(expr, "catalog") for expr in _catalog_index().get((n, k), [])]
    return list(dict.fromkeys(pairs))


@lru_cache(maxsize=1)
def _catalog_index() -> dict[tuple[int, int], list[str]]:
    """(N, d) → expressions of the search-found catalog entries (`catalog build`): bases whose
    stored schedule is not BFB. The catalog's analytical entries (K(m), rings, ...) are the
    generative families above, which the finder scores by BFB itself."""
    index: dict[tuple[int, int], list[str]] = {}
    for e in entries():
        command = e.get("provenance", {}).get("command", "")
        if "schedule" in e and command.startswith("topofinder catalog build"):
            index.setdefault((e["N"], e["d"]), []).append(e["expr"])
    return index


def catalog_bases() -> set[str]:
    """Expressions of the search-found catalog bases (scheduled from the catalog, not by BFB)."""
    return {expr for exprs in _catalog_index().values() for expr in exprs}
