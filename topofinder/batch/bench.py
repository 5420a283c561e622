"""`topofinder bench`: timings against the targets of docs/performance.md.

Each case is registered with :func:`case`: a name, a target in seconds and a zero-argument
function doing the work once (set-up that is not part of the measured work belongs in a
``setup`` function whose result is passed in). Figures are medians of several runs, printed
with the machine's core count and written to results/bench.json.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

from topofinder.errors import TopofinderError
from topofinder.compute.output import write_text
from topofinder.batch.bench_cases import CASES

#: Where `bench` merges its report, relative to the working directory.
RESULTS = Path("results") / "bench.json"


def run(selected: list[str] | None = None, repeat: int | None = None,
        progress: Callable[[str], None] | None = None) -> dict:
    """Run the registered cases (all, or those whose name contains a selected word)."""
    rows = []
    for c in CASES:
        if selected and not any(s.lower() in c.name.lower() for s in selected):
            continue
        if progress:
            progress(c.name)
        arg = c.setup() if c.setup else None
        times, failed = [], None
        for _ in range(repeat or c.repeat):
            t0 = time.perf_counter()
            try:
                c.run(arg)
            except AssertionError as exc:       # the case's own check (gap, memory) failed:
                failed = str(exc)               # recorded, and the other cases still run
            times.append(time.perf_counter() - t0)
            if failed:
                break
        median = statistics.median(times)
        row = {"name": c.name, "group": c.group, "median_s": median, "runs_s": times,
               "target_s": c.target_s,
               "meets_target": (False if failed else
                                None if c.target_s is None else median <= c.target_s)}
        if failed:
            row["failed"] = failed
        rows.append(row)
    return {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                        "platform": platform.platform()},
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cases": rows}


def read(path: Path = RESULTS) -> dict:
    """The report at ``path`` ({"cases": []} when there is none); TopofinderError when the file
    is not a bench report, so it is never overwritten by mistake."""
    if not path.exists():
        return {"cases": []}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TopofinderError(f"bench: cannot read {path} ({exc}); move it away to start a new "
                              f"report") from None
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if not isinstance(cases, list) or not all(isinstance(c, dict) and isinstance(
            c.get("name"), str) for c in cases):
        raise TopofinderError(f"bench: {path} is not a bench report (no 'cases' list of named "
                              f"rows); move it away to start a new report")
    return doc


def write(report: dict, path: Path = RESULTS) -> None:
    """Merge ``report`` into results/bench.json (cases replaced by name; rows of cases that
    no longer exist, renamed or removed, dropped), atomically."""
    old = read(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TopofinderError(f"bench: cannot create {path.parent}: {exc.strerror}") from None
    fresh = {r["name"] for r in report["cases"]}
    merged = dict(report)
    known = {c.name for c in CASES}
    merged["cases"] = [r for r in old.get("cases", [])
                       if r["name"] not in fresh and r["name"] in known] + report["cases"]
    write_text(path, json.dumps(merged, indent=2) + "\n")
