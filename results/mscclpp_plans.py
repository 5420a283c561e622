"""Issue 37's acceptance run: every frontier point of `search --n 256 --d 4` and the recommended
point of `search --n 1024 --d 4`, each of allgather, reduce-scatter and allreduce, exported as
MSCCL++ plans (`export --format mscclpp`, one GPU per node) and checked by the project's
execution model (`check_plan`) and by the independent reference (tests/mscclpp_reference.py,
an eager and a lazy-proxy random schedule). Each export and each check runs in its own process,
one at a time, and reports its CPU seconds and peak RSS.

    python3 results/mscclpp_plans.py [--n 256 1024] [--schedules 1|2] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))           # this checkout's package, not an installed one
COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(which: str, plan: str, coll: str, schedules: int = 2) -> dict:
    """Check one plan with one model in this process (the reference: the first ``schedules``
    of an eager and a lazy-proxy random schedule); the verdict and what it cost."""
    t = time.process_time()
    text = Path(plan).read_text()
    if which == "model":
        from topofinder.export.mscclpp import check_plan
        report = check_plan(text, collective=coll)
        ok, why = report.ok, report.first_error()
    else:
        sys.path.insert(0, str(ROOT / "tests"))
        from mscclpp_reference import Reference
        ref = Reference(json.loads(text))
        ok, why = True, None
        for seed, lazy in ((0, 0.0), (1, 0.9))[:schedules]:
            if not ref.correct(ref.run_random(seed, lazy_proxy=lazy)):
                ok, why = False, f"schedule seed {seed} lazy {lazy}: wrong result"
                break
    return {"ok": ok, "why": why, "cpu": time.process_time() - t, "mb": _peak_mb()}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], cwd=ROOT, capture_output=True,
                         text=True)
    if out.returncode:
        return {"ok": False, "why": out.stderr.strip().splitlines()[-1:], "cpu": None, "mb": None}
    return json.loads(out.stdout.strip().splitlines()[-1])


def export(expr: str, coll: str, path: Path) -> dict:
    t = time.process_time()
    from topofinder import api
    api.export_schedule_of(expr, "mscclpp", path, collective=coll)
    return {"ok": True, "cpu": time.process_time() - t, "mb": _peak_mb(),
            "bytes": path.stat().st_size}


def points(n: int) -> list[str]:
    from topofinder import api
    res = api.search(n, 4)
    if n == 256:
        return [p.expr for p in res.frontier]
    return [res.frontier[res.recommended].expr]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--out", default=None)
    ap.add_argument("--schedules", type=int, default=2, choices=(1, 2),
                    help="the reference's random schedules per plan: eager (1), and lazy (2)")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)   # WHICH PLAN COLL [K]
    ap.add_argument("--export", nargs=3, metavar=("EXPR", "COLL", "PLAN"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(*a.one[:3], *map(int, a.one[3:4]))))
        return
    if a.export:
        print(json.dumps(export(a.export[0], a.export[1], Path(a.export[2]))))
        return
    rows = ["| N | expression | collective | plan MB | export CPU s | model | model CPU s | "
            "model peak MB | reference | reference CPU s | reference peak MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.n:
            for expr in points(n):
                for coll in COLLECTIVES:
                    plan = Path(tmp) / "plan.json"
                    ex = _child(["--export", expr, coll, str(plan)])
                    got = {w: _child(["--one", w, str(plan), coll, str(a.schedules)])
                           for w in ("model", "reference")}
                    cells = []
                    for w in ("model", "reference"):
                        g = got[w]
                        verdict = "accepted" if g["ok"] else f"REFUSED: {g['why']}"
                        cells += [verdict, f"{g['cpu']:.1f}" if g["cpu"] is not None else "-",
                                  f"{g['mb']:.0f}" if g["mb"] is not None else "-"]
                    row = (f"| {n} | {expr} | {coll} | {ex.get('bytes', 0) / 1e6:.1f} | "
                           f"{ex['cpu'] or 0:.1f} | " + " | ".join(cells) + " |")
                    rows.append(row)
                    print(row, flush=True)
    if a.out:
        Path(a.out).write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
