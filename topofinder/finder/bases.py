"""Which base topologies exist at a given size and degree (paper 001 Table 9, docs/algorithms.md).

`base_expressions(n, k)` lists the expressions of every generative family and catalog entry
with exactly n nodes and out-degree k. The finder scores them and expands them; nothing here
scores anything.
"""

from __future__ import annotations

from functools import lru_cache
from topofinder.families import best_circulant
from topofinder.families.distance_regular import catalog_sizes
from topofinder.families.catalog import entries
from topofinder.finder import affine_catalog

# A BiRing/UniRing or torus far from the Moore bound is a base only while it is small; larger
# ones only matter as BW-optimal fall-backs at the target itself (``at_target``).
_RING_LIMIT = 64


def _integer_log(n: int, base: int) -> int | None:
    e, p = 0, 1
    while p < n:
        p *= base
        e += 1
    return e if p == n else None


def base_expressions(n: int, k: int, at_target: bool = False) -> list[tuple[str, str]]:
    """(expression, schedule source) pairs of the bases with n nodes and degree k; source is
    "bfb" (score with BFB) or "catalog" (a stored schedule). ``at_target``: the final (N, d),
    where large rings are kept as BW-optimal fall-backs."""
    out: list[tuple[str, str]] = []
    add = out.append
    if k == n - 1:
        add((f"K({n})", "bfb"))
    if n == 2 * k:
        add((f"K({k},{k})", "bfb"))
    for e in range(2, k + 1):                       # Hamming H(e, q): q^e nodes, e(q-1) ports
        if k % e == 0:
            q = k // e + 1
            if q ** e == n:
                add((f"H({e},{q})", "bfb"))
    e = _integer_log(n, 2)
    if e is not None and e == k and e >= 2:
        add((f"Hypercube({e})", "bfb"))
    if k >= 2:
        e = _integer_log(n // (k + 1), k) if n % (k + 1) == 0 else None
        if e is not None and e >= 1 and k ** e * (k + 1) == n:
            add((f"Kautz({k},{e})", "bfb"))
        e = _integer_log(n, k)
        if e is not None and e >= 2:
            add((f"DBJ({k},{e})", "bfb"))
        if n >= k + 1:
            add((f"Pi({k},{n})", "bfb"))
    if n >= 3 and k == n - 2:
        add((f"DC({n},{{{','.join(str(a) for a in range(1, n - 1))}}})", "bfb"))
    if k % 2 == 0 and (at_target or n <= _RING_LIMIT or k == 2):
        add((f"BiRing({k},{n})", "bfb"))
    if at_target or n <= _RING_LIMIT or k == 1:
        add((f"UniRing({k},{n})", "bfb"))
    out += _extension_bases(n, k)
    return _dedupe(out)


def _extension_bases(n: int, k: int) -> list[tuple[str, str]]:
    """Bases from the larger generators: best circulants, distance-regular graphs, twisted tori,
    the search-found catalog and the affine digraphs of catalog/affine.json."""
    out = []
    if k % 2 == 0 and n >= 3:
        out.append((best_circulant(n, k).expr, "bfb"))
    if (k, n) in catalog_sizes():
        out.append((f"DistReg({k},{n})", "bfb"))
    if k >= 4 and k % 2 == 0:                        # TwistedTorus(2a, a, ..., a): N = 2a^(k/2)
        dims = k // 2
        a = round((n / 2) ** (1 / dims))
        for cand in (a - 1, a, a + 1):
            if cand >= 2 and 2 * cand ** dims == n:
                sides = [2 * cand] + [cand] * (dims - 1)
                out.append((f"TwistedTorus({','.join(map(str, sides))})", "bfb"))
    out += [(expr, "catalog") for expr in _catalog_index().get((n, k), [])]
    out += [(expr, "bfb") for expr in affine_catalog.catalog().get((n, k), [])]
    return out


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


def _dedupe(pairs):
    seen, out = set(), []
    for expr, source in pairs:
        if (expr, source) not in seen:
            seen.add((expr, source))
            out.append((expr, source))
    return out


def catalog_bases() -> set[str]:
    """Expressions of the search-found catalog bases (scheduled from the catalog, not by BFB)."""
    return {expr for exprs in _catalog_index().values() for expr in exprs}
