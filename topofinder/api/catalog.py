"""The base-topology catalog: list it, build entries by exhaustive search, and search the
affine digraphs the finder reads as bases (docs/cli.md, `topofinder catalog`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from topofinder.errors import TopofinderError
from topofinder.families.catalog import listing
from topofinder.finder import affine_catalog
from topofinder.finder.catalog_build import PRESETS, run as build_base

#: The named catalog builds (``catalog_build("Diamond")``), each with its search parameters.
CATALOG_PRESETS = tuple(PRESETS)
#: Draws per (N, d) and their seed for :func:`catalog_affine`.
AFFINE_TRIES, AFFINE_SEED = affine_catalog.DEFAULT_TRIES, affine_catalog.DEFAULT_SEED


def catalog_list() -> list[dict]:
    """One row per catalog entry (`catalog list --json`'s ``entries``): expr, N, d, T_L,
    tau (M/B) and tau_exact, bw_optimal, moore_optimal, schedule (stored or bfb), provenance.

    >>> "Diamond" in {row["expr"] for row in catalog_list()}
    True
    """
    return listing()


def catalog_build(names: list[str] | tuple[str, ...] = (), *, name: str | None = None,
                  write: bool = True, target: str | Fraction | None = None,
                  progress: Callable[[dict], None] | None = None,
                  done: Callable[[dict], None] | None = None, **options) -> list[dict]:
    """Run the exhaustive searches that find catalog bases: the presets ``names`` (``["all"]``:
    every preset) or one custom search named ``name``; ``options`` (space, n, d, steps,
    chunks, reverse_symmetric, time_limit, budget, search_all; None: the preset's) override
    the preset; ``target``: τ to reach in M/B ("7/8"; default (N-1)/N). A base found is
    written to catalog/ unless ``write`` is False. One report per build (its ``found``,
    ``T_L``, ``tau``, ``candidates``, ``searches``, ``path``, ...); ``progress(row)`` follows
    every CP-SAT search, ``done(report)`` every finished build."""
    if name and names:
        raise TopofinderError("catalog build: give preset NAMEs or --name, not both")
    try:
        target = None if target is None else Fraction(target)
    except (ValueError, ZeroDivisionError):
        raise TopofinderError(f"catalog build: --target {target!r} is not a number such as "
                              f"7/8 or 0.875") from None
    todo = list(CATALOG_PRESETS) if list(names) == ["all"] else list(names) or [name]
    reports = []
    for entry in todo:
        reports.append(build_base(entry, write=write, progress=progress, target=target,
                                  **options))
        if done is not None:
            done(reports[-1])
    return reports


def catalog_affine(degrees=(4,), n_min: int = 5, n_max: int = 2000,
                   path: str | os.PathLike | None = None, *, tries: int = AFFINE_TRIES,
                   seed: int = AFFINE_SEED, jobs: int | None = None) -> tuple[dict, Path]:
    """Search affine digraphs x → q·x + a mod N for every N in n_min..n_max and each degree
    (``tries`` seeded draws), keep the Pareto set in (diameter, τ) and write the catalog file
    (default: the shipped catalog/affine.json). Returns the catalog document and its path."""
    if not all(1 <= d <= 64 for d in degrees) or tries < 1 or not 5 <= n_min <= n_max <= 100_000:
        raise TopofinderError("catalog affine: needs 1 <= d <= 64, --tries >= 1 and "
                              "5 <= --n-min <= --n-max <= 100000")
    if jobs is not None and jobs < 1:
        raise TopofinderError(f"catalog affine: --jobs must be >= 1, got {jobs}")
    path = Path(path) if path else affine_catalog.CATALOG_FILE
    return affine_catalog.build_catalog(list(degrees), n_min, n_max, path, tries=tries,
                                        seed=seed, jobs=jobs), path
