"""Affine digraphs for every size (issue 18; docs/algorithms.md "Affine digraphs").

The generalized Kautz graph Pi(d,N) has the least diameter at almost every N, but at sizes that
are not Kautz sizes its BFB schedule pays τ ≈ 4/3 at d = 4 (some nodes' in-balls are much
smaller than others', so one step's load is set by a few nodes), and its self-loops cap even
ForestColl's optimum at (N−1)/N · d/(d−1). Affine digraphs Aff(N,q,A), x → q·x + a mod N
(topofinder.families.basic.affine, loops rewired), contain Pi and spread the in-balls evenly
for most (q, A): one step more diameter for τ close to (N−1)/N.

:func:`search` draws (q, A) pseudo-randomly (seeded by N and d, so a catalog rebuild is
reproducible) and then moves q or one offset of the best so far (tries/2 more), keeps the
strongly connected ones with diameter ≤ that of Pi(d,N) + 2, scores each by BFB exactly and
keeps the Pareto set in (diameter, τ). :func:`build_catalog` runs it for
a range of N and writes the shipped catalog (catalog/affine.json) that the finder reads as
bases; nothing is searched during `topofinder search`.
"""

from __future__ import annotations

import json
import os
import time
from fractions import Fraction
from math import gcd
from pathlib import Path

import numpy as np

from topofinder.compute.parallel import run_parallel
from topofinder.errors import TopofinderError
from topofinder.families.basic import affine, generalized_kautz
from topofinder.families.catalog import AFFINE_FILE, CATALOG_DIR, affine_bases
from topofinder.scoring.allgather.bfb import bfb_tau

#: Candidates scored per (N, d) by default (about 40 ms each at N = 2000 on one core).
DEFAULT_TRIES = 64
#: Seed of the draws; with N and d it fixes every candidate.
DEFAULT_SEED = 18


def _draws(n: int, d: int, seed: int):
    """(q, A) pairs: q a unit mod n other than 1 and n−1, A a d-subset of 1..n−1."""
    rng = np.random.default_rng([seed, n, d])
    units = np.array([q for q in range(2, n - 1) if gcd(q, n) == 1])
    if units.size == 0 or n - 1 < d:
        return
    while True:
        q = int(units[rng.integers(units.size)])
        gens = sorted(int(a) for a in rng.choice(np.arange(1, n), d, replace=False))
        yield q, gens


def search(n: int, d: int, tries: int = DEFAULT_TRIES, seed: int = DEFAULT_SEED) -> list[dict]:
    """The Pareto set in (diameter, BFB τ) of ``tries`` affine digraphs on n nodes of degree d
    with diameter ≤ diameter(Pi(d,n)) + 2; each entry {"expr", "q", "A", "diameter", "tau"}
    (τ exact, M/B). Empty when n is too small for a unit q."""
    if n < 5 or d < 1:
        return []
    limit = generalized_kautz(d, n).diameter + 2
    found: list[tuple[int, Fraction, int, list[int]]] = []

    def score(q: int, gens: list[int]) -> None:
        topo = affine(n, q, gens)
        if topo.strongly_connected and topo.diameter <= limit:
            found.append((topo.diameter, bfb_tau(topo), q, gens))

    draws = _draws(n, d, seed)
    for _ in range(tries):
        try:
            score(*next(draws))
        except StopIteration:
            return []
    # then a local search from the best draw: move q or one offset, keep what is better
    rng = np.random.default_rng([seed, n, d, 1])
    for _ in range(tries // 2):
        if not found:
            break
        _, _, q, gens = min(found, key=lambda r: r[:2])
        if rng.random() < 0.25:
            q = next(draws)[0]
        else:
            gens = list(gens)
            gens[rng.integers(d)] = int(rng.integers(1, n))
            if len(set(gens)) < d:
                continue
            gens.sort()
        score(q, gens)
    front: list[dict] = []
    for diameter, tau, q, gens in sorted(found, key=lambda r: (r[0], r[1], r[2], r[3])):
        if front and front[-1]["tau"] <= tau:
            continue
        front.append({"expr": affine(n, q, gens).expr, "q": q, "A": gens,
                      "diameter": diameter, "tau": tau})
    return front


def _search_row(n: int, d: int, tries: int, seed: int):
    return [{**e, "tau": f"{e['tau'].numerator}/{e['tau'].denominator}"}
            for e in search(n, d, tries, seed)]


def _kept_degrees(path: Path) -> dict:
    """The degrees already in the catalog file at ``path`` ({} when there is none yet);
    TopofinderError when ``path`` cannot be written or holds something other than an affine
    catalog (it is never overwritten then)."""
    if path.is_dir() or not path.parent.is_dir():
        raise TopofinderError(f"affine catalog: cannot write {path}: "
                              f"{'it is a directory' if path.is_dir() else 'no such directory'}")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise TopofinderError(f"affine catalog: cannot write {path}: permission denied")
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        if doc.get("version") == 2 and isinstance(doc.get("degrees"), dict):
            return doc["degrees"]
    except (OSError, ValueError, AttributeError):
        pass
    raise TopofinderError(f"affine catalog: {path} exists and is not an affine catalog "
                          f"(version 2); give another output file")


def build_catalog(degrees, n_min: int, n_max: int, path: Path, *, tries: int = DEFAULT_TRIES,
                  seed: int = DEFAULT_SEED, jobs: int | None = None,
                  progress: bool = True) -> dict:
    """Run :func:`search` for every d in ``degrees`` and n_min ≤ N ≤ n_max (in parallel, with a
    progress bar) and write the catalog JSON to ``path`` whole at the end (via a temporary
    file: nothing half-written). Degrees already in the file and not rebuilt are kept; each
    degree records the command that built it. The output is checked before the search."""
    if n_min < 2 or n_max < n_min:
        raise TopofinderError(f"affine catalog: needs 2 <= n_min <= n_max, got {n_min}..{n_max}")
    if seed < 0:
        raise TopofinderError(f"affine catalog: the seed must be >= 0, got {seed}")
    path = Path(path)
    _kept_degrees(path)
    start = time.perf_counter()
    tasks = [(n, d, tries, seed) for d in degrees for n in range(n_min, n_max + 1)]
    rows = run_parallel(_search_row, tasks, jobs=jobs, progress=progress,
                        label="catalog affine")
    entries: dict[str, dict[str, list]] = {str(d): {} for d in degrees}
    for (n, d, _, _), found in zip(tasks, rows):
        if found:
            entries[str(d)][str(n)] = found
    seconds = round(time.perf_counter() - start, 1)
    kept = _kept_degrees(path)             # other degrees already in the file are kept
    for d in degrees:
        kept[str(d)] = {
            "provenance": {"command": (f"topofinder catalog affine --d {d} --n-min {n_min} "
                                       f"--n-max {n_max} --tries {tries} --seed {seed}"),
                           "method": "affine digraphs x -> q*x + a mod N (loops rewired), "
                                     f"{tries} seeded draws per N and {tries // 2} local "
                                     "moves from the best, diameter <= Pi's + 2, Pareto set "
                                     "in (diameter, BFB tau)",
                           "seconds": seconds},
            "entries": entries[str(d)]}
    doc = {"version": 2, "degrees": dict(sorted(kept.items(), key=lambda kv: int(kv[0])))}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    tmp.replace(path)
    affine_bases.cache_clear()
    return doc


#: The shipped catalog (package data).
CATALOG_FILE = CATALOG_DIR / AFFINE_FILE

