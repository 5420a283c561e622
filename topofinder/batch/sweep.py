"""`topofinder sweep SPEC.toml`: frontiers for many (N, d) (paper 001 App. A.3; docs/cli.md).

A spec names node counts, degrees and workloads:

    name = "paper"                 # results go to <out>/<name>/ (default ./results/<name>/)
    degrees = [2, 4, 8, 16]
    n_min = 4                      # or: n = [32, 64, 128]
    n_max = 2000
    bidirectional = false
    verify = false                 # true: build and replay every frontier point (slow)
    [workload]
    alpha = "10us"
    bandwidth = "100Gbps"
    sizes = ["1MB", "100MB"]       # one "best topology per N" ranking per size
    broadcast_share = 0.0          # optional: best.csv ranks by the mix with a one-root
                                   # broadcast of the same size (as search --broadcast-share)

Every (N, d) cell is written to results/<name>/cells/N<N>_d<d>.json atomically as soon as it
is done, so an interrupted sweep resumes where it stopped (done cells are skipped) and produces
the same files as an uninterrupted one. The summary files (frontier.csv, frontier.json,
best.csv, plots) are rebuilt from the cells at the end, also atomically.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from topofinder.compute.output import write_text
from topofinder.model.inputs import read_input, read_json
from topofinder.compute.cache import cached
from topofinder.errors import TopofinderError
from topofinder.compute.parallel import run_parallel
from topofinder.workload.broadcast import broadcast_tp
from topofinder.workload.cost import Workload
from topofinder.finder.frontier import final_candidates, verifiable_frontier
from topofinder.finder.verify import allreduce_price
from topofinder.workload.rank import search
from topofinder.export.sweep_plot import plot_best_per_n
from topofinder.model.bounds import check_claim
from topofinder.model.names import CsvWriter
from topofinder.model.topology import MAX_NODES
from topofinder.model.units import exact

#: Default output folder, relative to the working directory (`sweep --out` overrides it).
RESULTS = Path("results")


@dataclass(frozen=True)
class Spec:
    name: str
    cells: tuple[tuple[int, int], ...]
    bidirectional: bool
    verify: bool
    workloads: tuple[Workload, ...]
    labels: tuple[str, ...]


#: Most cells one spec may ask for (the paper sweep has 7,969; 50,000 is hours on 2 cores).
MAX_CELLS = 50_000
#: Largest degree the finder handles (the BFB generator's subset transform).
MAX_DEGREE = 16
#: Most workload sizes per spec (each gets a best.csv ranking and a plot per degree).
MAX_SIZES = 16
_WORKLOAD_KEYS = {"alpha", "bandwidth", "sizes", "alltoall_share", "broadcast_share"}


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flag(doc: dict, key: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise TopofinderError(f"sweep: '{key}' must be true or false, got {ascii(value)[:40]}")
    return value


def load_spec(path: str | Path) -> Spec:
    """Read and check a sweep spec (TOML) as strictly as the command line checks its options;
    TopofinderError naming the problem otherwise."""
    path = Path(path)
    if path.is_dir():
        raise TopofinderError(f"sweep: {path} is a directory; give a SPEC.toml file")
    try:
        doc = tomllib.loads(read_input(path, "sweep spec"))
    except FileNotFoundError:
        raise TopofinderError(f"sweep: no spec file {path}") from None
    except OSError as exc:
        raise TopofinderError(f"sweep: cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TopofinderError(f"sweep: {path} is not valid TOML: {exc}") from None
    known = {"name", "degrees", "n", "n_min", "n_max", "bidirectional", "verify", "workload"}
    unknown = set(doc) - known
    if unknown:
        raise TopofinderError(f"sweep: unknown key(s) {sorted(unknown)} in {path}; "
                              f"accepted: {sorted(known)}")
    name = doc.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):
        raise TopofinderError(f"sweep: name {ascii(name)[:60]} must be a plain folder name "
                              f"(letters, digits, '.', '_', '-'; at most 100)")
    degrees = doc.get("degrees")
    if not isinstance(degrees, list) or not degrees or not all(
            _int(k) and 1 <= k <= MAX_DEGREE for k in degrees):
        raise TopofinderError(f"sweep: 'degrees' must be a non-empty list of integers in "
                              f"1..{MAX_DEGREE}")
    if "n" in doc:
        ns = doc["n"]
        if not isinstance(ns, list) or not ns or len(ns) > MAX_CELLS or not all(
                _int(x) and 2 <= x <= MAX_NODES for x in ns):
            raise TopofinderError(f"sweep: 'n' must be a non-empty list of at most {MAX_CELLS} "
                                  f"integers in 2..{MAX_NODES}")
    else:
        lo, hi = doc.get("n_min"), doc.get("n_max")
        if not _int(lo) or not _int(hi) or lo < 2 or hi < lo:
            raise TopofinderError("sweep: give 'n' (a list) or integers 2 <= n_min <= n_max")
        if (hi - lo + 1) * len(degrees) > MAX_CELLS:
            raise TopofinderError(f"sweep: {(hi - lo + 1) * len(degrees)} cells; at most "
                                  f"{MAX_CELLS} per spec (split the range)")
        if hi > MAX_NODES:
            raise TopofinderError(f"sweep: n_max = {hi}; topofinder handles N <= {MAX_NODES}")
        ns = list(range(lo, hi + 1))
    bidirectional, verify = _flag(doc, "bidirectional"), _flag(doc, "verify")
    cells = []
    for k in sorted(set(degrees)):
        for n in sorted(set(ns)):
            if k < n and not (bidirectional and ((n * k) % 2 or k == 1)):
                cells.append((n, k))
    if not cells:
        raise TopofinderError("sweep: the spec has no cell with d < N (and, with "
                              "bidirectional, N·d even and d >= 2)")
    if len(cells) > MAX_CELLS:
        raise TopofinderError(f"sweep: {len(cells)} cells; at most {MAX_CELLS} per spec")
    w = doc.get("workload", {})
    if not isinstance(w, dict):
        raise TopofinderError("sweep: 'workload' must be a table ([workload] with alpha, "
                              "bandwidth, sizes, alltoall_share)")
    if set(w) - _WORKLOAD_KEYS:
        raise TopofinderError(f"sweep: unknown workload key(s) {sorted(set(w) - _WORKLOAD_KEYS)};"
                              f" accepted: {sorted(_WORKLOAD_KEYS)}")
    sizes = w.get("sizes", ["1MB"])
    if not isinstance(sizes, list) or not sizes or len(sizes) > MAX_SIZES or not all(
            isinstance(s, str) for s in sizes):
        raise TopofinderError(f"sweep: workload.sizes must be a non-empty list of at most "
                              f"{MAX_SIZES} strings such as ['1MB', '100MB']")
    if len(set(sizes)) != len(sizes):        # each size names its own best.csv column and plot
        twice = ascii(max(sizes, key=sizes.count))[:40]
        raise TopofinderError(f"sweep: workload.sizes lists {twice} twice; give each size once")
    for key in ("alpha", "bandwidth"):
        if not isinstance(w.get(key, ""), str):
            raise TopofinderError(f"sweep: workload.{key} must be a string such as "
                                  f"{'10us' if key == 'alpha' else '100Gbps'!r}")
    shares = [w.get(key, 0.0) for key in ("alltoall_share", "broadcast_share")]
    for key, share in zip(("alltoall_share", "broadcast_share"), shares):
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            raise TopofinderError(f"sweep: workload.{key} must be a number in [0, 1], "
                                  f"got {ascii(share)[:40]}")
    workloads = tuple(Workload.from_strings(w.get("alpha", "10us"), w.get("bandwidth", "100Gbps"),
                                            s, *shares) for s in sizes)
    return Spec(name, tuple(cells), bidirectional, verify, workloads, tuple(sizes))


def cell_path(out: Path, n: int, k: int, bidirectional: bool = False,
              verify: bool = False) -> Path:
    """One file per cell, named by everything its content depends on."""
    flags = ("_bidirectional" if bidirectional else "") + ("_verified" if verify else "")
    return out / "cells" / f"N{n}_d{k}{flags}.json"


def atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename: never half-written; a
    symbolic link planted at ``path`` is replaced, not followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text, follow=False)


def compute_cell(n: int, k: int, bidirectional: bool, verify: bool) -> dict:
    """The frontier of one (N, d) — the union of the allgather's and the exported allreduce's
    (`verifiable_frontier`) —: predicted (exact for scored bases, theorem values for
    expansions), or fully verified with ``verify``. Either way it is the frontier `search`
    gives: beyond the replay limit the points neither built by expansions of replayable
    operands (verified by construction, search's default) nor with an orbit form are left
    out and listed under ``skipped`` (`verifiable_frontier`, search's ``skipped_points``).
    Base scores are memoised in the worker process; the disk cache holds whole cells (see
    `_run_cell`)."""
    if verify:
        result = search(n, k, bidirectional=bidirectional, jobs=1, use_cache=False)
        points = [{"expr": p.expr, "T_L": p.T_L, "tau": p.tau, "tau_exact": p.tau_exact,
                   "schedule": p.schedule, "verified": True, "allreduce_T_L": p.allreduce_T_L,
                   "allreduce_tau_exact": p.allreduce_tau_exact} for p in result.frontier]
        skipped = list(result.unverified)
    else:
        frontier, skipped = verifiable_frontier(
            final_candidates(n, k, bidirectional, jobs=1, use_cache=False),
            final_candidates(n, k, bidirectional, jobs=1, use_cache=False, whole=True),
            construction=True)
        if not frontier:
            raise TopofinderError(f"no frontier point of N = {n}, d = {k} can be verified: "
                                  f"{skipped[0]['expr']}: {skipped[0]['reason']}")
        points = []
        for c in frontier:
            ar_t_l, ar_tau = allreduce_price(c)
            points.append({"expr": c.expr, "T_L": c.t_l, "tau": float(c.tau),
                           "tau_exact": exact(c.tau), "schedule": c.recipe.method,
                           "verified": False, "exact": c.exact, "allreduce_T_L": ar_t_l,
                           "allreduce_tau_exact": exact(ar_tau)})
    return {"N": n, "d": k, "frontier": points, **({"skipped": skipped} if skipped else {})}


def _run_cell(n, k, bidirectional, verify, use_cache) -> dict:
    """Compute one cell (in a worker, possibly on another machine: its disk cache is that
    machine's); a failure is returned as {"N", "d", "error"} instead of aborting the sweep."""
    try:
        doc = cached(compute_cell, use_cache, check_cell)(n, k, bidirectional, verify)
    except TopofinderError as exc:
        return {"N": n, "d": k, "error": str(exc)}
    return {**doc, "bidirectional": bidirectional, "verify": verify}


def _write_cell(out: Path, doc: dict) -> None:
    """A finished cell written by the process that runs the sweep, as soon as it arrives (a
    failed one is not written, so a rerun retries it)."""
    if "error" not in doc:
        atomic_write(cell_path(out, doc["N"], doc["d"], doc["bidirectional"], doc["verify"]),
                     json.dumps(doc, indent=1) + "\n")


def run_sweep(spec: Spec, out_root: Path = RESULTS, jobs: int | None = None,
              use_cache: bool = True, progress: bool = True) -> tuple[Path, list[dict]]:
    """Compute the missing cells (in parallel), then rebuild the summary files from the cells
    that exist. Cells that failed are listed in failed.csv (N, d, error) and not in the
    summaries; a rerun retries them. Returns the output folder and the failures."""
    if out_root.exists() and not out_root.is_dir():
        raise TopofinderError(f"sweep: --out {out_root} is a file; give a folder")
    out = out_root / spec.name
    path = {c: cell_path(out, *c, spec.bidirectional, spec.verify) for c in spec.cells}
    todo = [c for c in spec.cells if _valid_cell(path[c], *c) is None]
    results = run_parallel(_run_cell, [(n, k, spec.bidirectional, spec.verify, use_cache)
                                       for n, k in todo], jobs=jobs, progress=progress,
                           label=f"sweep {spec.name}",
                           on_result=lambda _, doc: _write_cell(out, doc))
    failed = [r for r in results if "error" in r]
    cells = [cell for c in spec.cells if (cell := _valid_cell(path[c], *c)) is not None]
    write_summaries(spec, cells, out)
    if failed:
        atomic_write(out / "failed.csv", _csv(failed))
    elif (out / "failed.csv").exists():
        (out / "failed.csv").unlink()
    return out, failed


def check_cell(args: tuple, cell: dict) -> None:
    """A cell (cached or on disk) for (N, d) = ``args[:2]`` that can be true: its N and d, and
    every frontier point's T_L and τ within the Moore, hop and (N−1)/N bounds (ValueError)."""
    n, k = args[0], args[1]
    if (cell["N"], cell["d"]) != (n, k) or not cell["frontier"]:
        raise ValueError(f"cell for N = {n}, d = {k} holds N = {cell['N']}, d = {cell['d']}")
    for p in cell["frontier"]:
        check_claim(n, k, p["T_L"], p["tau_exact"], p["expr"])
        check_claim(n, k, -(-p["allreduce_T_L"] // 2), Fraction(p["allreduce_tau_exact"]) / 2,
                    f"allreduce of {p['expr']}")
        if abs(float(Fraction(p["tau_exact"])) - float(p["tau"])) > 1e-9:
            raise ValueError(f"{p['expr']}: tau {p['tau']} is not tau_exact {p['tau_exact']}")


def _valid_cell(path: Path, n: int, k: int) -> dict | None:
    """The cell file at ``path`` when it exists, parses and passes `check_cell`, else None
    (a corrupt or impossible cell is recomputed, never published)."""
    if not os.path.lexists(path):
        return None
    try:
        cell = read_json(read_input(path, "sweep cell"), str(path))
        check_cell((n, k), cell)
        return cell
    except (OSError, ValueError, TypeError, KeyError, ZeroDivisionError) as exc:
        why = "".join(c if c.isprintable() else "?" for c in str(exc))[:200]
        print(f"topofinder: recomputing {path.name} ({why})", file=sys.stderr)
        return None


def write_summaries(spec: Spec, cells: list[dict], out: Path) -> None:
    """frontier.csv / frontier.json (every point), best.csv (best per N, d and size), plots."""
    rows = []
    for cell in cells:
        for p in cell["frontier"]:
            rows.append({"N": cell["N"], "d": cell["d"], "expr": p["expr"], "T_L": p["T_L"],
                         "tau": p["tau"], "tau_exact": p["tau_exact"],
                         "schedule": p["schedule"], "verified": p["verified"],
                         "allreduce_T_L": p["allreduce_T_L"],
                         "allreduce_tau_exact": p["allreduce_tau_exact"]})
    atomic_write(out / "frontier.csv", _csv(rows))
    atomic_write(out / "frontier.json", json.dumps({"spec": spec.name, "cells": cells},
                                                   indent=1) + "\n")
    tps = {}
    best = [_best_row(cell, label, w, tps) for cell in cells
            for label, w in zip(spec.labels, spec.workloads)]
    atomic_write(out / "best.csv", _csv(best))

    for k in sorted({c["d"] for c in cells}):
        for label in spec.labels:
            plot_best_per_n([b for b in best if b["d"] == k and b["size"] == label],
                            out / f"best_d{k}_{label}.png", degree=k, size_label=label)


def _best_row(cell: dict, label: str, w: Workload, tps: dict) -> dict:
    """best.csv's row for one cell and size: the point of least allreduce time, or with a
    broadcast share of least objective, the broadcast priced as search prices it
    (topofinder.workload.broadcast; ``tps`` memoises TP by expression)."""
    pts = cell["frontier"]
    times = [w.collective_time(p["allreduce_T_L"], float(Fraction(p["allreduce_tau_exact"])))
             for p in pts]
    bcast = [None] * len(pts)
    if w.broadcast_share > 0:
        for p in pts:
            if p["expr"] not in tps:
                tps[p["expr"]] = broadcast_tp(p["expr"])
        bcast = [w.broadcast_time(cell["d"], tps[p["expr"]]) for p in pts]
    goal = [w.objective(t, None, b) for t, b in zip(times, bcast)]
    i = min(range(len(pts)), key=lambda j: (goal[j], pts[j]["T_L"]))
    return {"N": cell["N"], "d": cell["d"], "size": label, "expr": pts[i]["expr"],
            "T_L": pts[i]["T_L"], "tau": pts[i]["tau"], "allreduce_T_L": pts[i]["allreduce_T_L"],
            "allreduce_tau_exact": pts[i]["allreduce_tau_exact"], "allreduce_time_s": times[i],
            **({"broadcast_time_s": bcast[i], "objective_s": goal[i]}
               if w.broadcast_share > 0 else {})}


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    if rows:
        writer = CsvWriter(buf)
        writer.writerow(list(rows[0]))
        writer.writerows([list(r.values()) for r in rows])
    return buf.getvalue()
