"""Issue 28's table for N = 512 and 1024: every frontier point of `search --n N --d 4` ×
{allgather, reduce-scatter, allreduce} × K channels, exported as MSCCL XML by the command line
and checked by the execution model (`msccl.execution.check`, capacity 1 and 2), or refused.

Run from the repository root: PYTHONPATH=. python3 results/msccl_xml_n512_n1024.py
(options: --n, --channels, --only-collective, --out, --dry-run, --render-only). One row at a
time, each step in a fresh process under /usr/bin/time; a row is stored as JSON under
results/msccl_xml_n512_n1024/ with the package's code version, and skipped on a re-run with
the same code. The markdown table results/msccl_xml_n512_n1024.md is rendered from the rows;
text after its NOTES marker is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import topofinder
from topofinder.api import search
from topofinder.compute.cache import code_version

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")
NOTES = "<!-- hand-written notes below this line are kept when the table is rendered -->"
COMMAND = "PYTHONPATH=. python3 results/msccl_xml_n512_n1024.py"
#: The check, run in a fresh process: the file streamed by the parser, then the execution model.
CHECK = ("import json, pathlib, sys\n"
         "from topofinder.export.msccl.execution import check\n"
         "from topofinder.export.msccl.limits import MscclCheckError\n"
         "try:\n"
         "    s = check(pathlib.Path(sys.argv[1]), 'msccl-executor', capacities=(1, 2))\n"
         "except MscclCheckError as exc:\n"
         "    print(json.dumps({'error': str(exc)}))\n"
         "else:\n"
         "    s.pop('steps_per_tb')\n"
         "    print(json.dumps({'stats': s}))\n")


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (exit 2) instead of usage + error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options; bad values end in one line on stderr, exit 2."""
    p = Parser(prog="msccl_xml_n512_n1024.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[512, 1024], help="node counts (d = 4)")
    p.add_argument("--channels", type=int, nargs="+", default=[1, 2], help="K values")
    p.add_argument("--only-collective", choices=COLLECTIVES, action="append",
                   help="this collective only (repeatable)")
    p.add_argument("--out", type=Path, default=HERE / "msccl_xml_n512_n1024",
                   help="directory of row JSONs; the table is OUT.md")
    p.add_argument("--dry-run", action="store_true", help="list the rows and what would run")
    p.add_argument("--render-only", action="store_true", help="only render OUT.md from the rows")
    args = p.parse_args(argv)
    if min(args.n) < 2 or min(args.channels) < 1:
        p.error("--n must be ≥ 2 and --channels ≥ 1")
    if Path(topofinder.__file__).resolve().parent != ROOT / "topofinder":
        p.error(f"topofinder is imported from {Path(topofinder.__file__).parent}, not this "
                f"checkout: run from {ROOT} with PYTHONPATH=.")
    return args


def row_path(out: Path, n: int, expr: str, collective: str, k: int) -> Path:
    """The row's JSON file: readable slug of the expression plus a short digest of it."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", expr).strip("_")
    digest = hashlib.sha256(expr.encode()).hexdigest()[:6]
    return out / f"n{n}_k{k}_{collective}_{slug}_{digest}.json"


def timed(cmd: list[str], env: dict) -> dict:
    """Run ``cmd`` under /usr/bin/time: exit code, stdout, stderr lines, CPU (user + system)
    and wall seconds, peak resident memory in GB."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        proc = subprocess.run(["/usr/bin/time", "-o", tf.name, "-f", "%U %S %e %M", *cmd],
                              capture_output=True, text=True, env=env, cwd=ROOT)
        user, system, wall, peak_kb = tf.read().split("\n")[-2].split()
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr.splitlines(),
            "cpu_s": float(user) + float(system), "wall_s": float(wall),
            "peak_gb": int(peak_kb) / 2**20}


def file_digest(path: Path) -> str:
    """sha256 of a file, read in 16 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    return h.hexdigest()


def run_row(n: int, expr: str, collective: str, k: int, scratch: Path) -> dict:
    """Export one row with the CLI, then check the file in a second process; the XML is
    deleted afterwards. Each process gets an empty TOPOFINDER_CACHE (cold, reproducible)."""
    xml = scratch / "row.xml"
    cache = Path(tempfile.mkdtemp(prefix="cache", dir=scratch))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOPOFINDER_CACHE=str(cache))
    row = {"n": n, "expr": expr, "collective": collective, "channels": k,
           "load": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    cmd = [sys.executable, "-m", "topofinder", "export", expr, "--what", "schedule",
           "--collective", collective, "--format", "xml", "--channels", str(k), "-o", str(xml)]
    row["export"] = timed(cmd, env)
    del row["export"]["stdout"]
    row["export"]["stderr"] = [x.replace(str(xml), "F") for x in row["export"]["stderr"]]
    row["check"] = None
    if xml.exists():
        row["export"].update(bytes=xml.stat().st_size, sha256=file_digest(xml))
        shutil.rmtree(cache)
        cache.mkdir()
        check = timed([sys.executable, "-c", CHECK, str(xml)], env)
        out = json.loads(check.pop("stdout") or "{}")
        row["check"] = {**check, **out}
        xml.unlink()
    shutil.rmtree(cache)
    row["status"] = status(row)
    return row


def status(row: dict) -> str:
    """ok (written and checked), refused (the exporter's one-line error, no file), failed."""
    if row["check"] is None:
        last = row["export"]["stderr"][-1:] or [""]
        refused = row["export"]["rc"] == 2 and last[0].startswith("topofinder: error:")
        return "refused" if refused else "failed"
    return "ok" if row["check"]["rc"] == 0 and "stats" in row["check"] else "failed"


def cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|")


def export_cells(row: dict) -> tuple[str, str, str]:
    """(export cost or refusal, XML MB, 'T_L, τ' from the price line) of a row."""
    e = row["export"]
    cost = f"{e['cpu_s']:.1f} ({e['wall_s']:.0f}), {e['peak_gb']:.2f} GB"
    if "bytes" not in e:
        last = (e["stderr"][-1:] or [f"exit {e['rc']}"])[0].removeprefix("topofinder: error: ")
        word = "refused" if row["status"] == "refused" else f"FAILED (exit {e['rc']})"
        return f"{word} in {e['cpu_s']:.1f} s, {e['peak_gb']:.2f} GB — {cell(last)}", "", ""
    price = re.search(r"T_L = (\d+), τ = ([\d/]+)", " ".join(e["stderr"]))
    return cost, f"{e['bytes'] / 1e6:.1f}", f"{price[1]}, {price[2]}" if price else ""


def notes(row: dict) -> str:
    """Stderr lines of a written export other than its size and price lines."""
    lines = [x for x in row["export"]["stderr"] if "bytes" in row["export"]
             and not re.match(r"MSCCL XML: [\d.]+ MB, writing", x) and "replayed α-β" not in x]
    return cell("; ".join(lines))


def table_row(row: dict) -> str:
    """One markdown line of the table (columns as in the header)."""
    cost, mb, price = export_cells(row)
    c, stats = row["check"], (row["check"] or {}).get("stats")
    if stats:
        counts = [stats["max_steps_per_tb"], stats["max_tbs_per_gpu"], stats["max_nodes_per_rank"]]
        verdict = f"ok, {c['cpu_s']:.1f} s, {c['peak_gb']:.2f} GB"
    else:
        counts = ["", "", ""]
        verdict = "" if c is None else cell(
            f"FAILED in {c['cpu_s']:.1f} s: " + (c.get("error") or (c["stderr"][-1:] or ["?"])[0]))
    digest = f"`{row['export']['sha256'][:10]}`" if "sha256" in row["export"] else ""
    cells = [row["n"], row["expr"], row["collective"], cost, mb, *counts, price, verdict,
             digest, f"{row['load']:.2f}", notes(row)]
    return "| " + " | ".join(str(x) for x in cells) + " |"


HEADER = """\
| N | expression | collective | export CPU s (wall), peak | XML MB | steps/tb | tbs/rank | \
elements/rank | T_L, τ | check (cap 1, 2): CPU s, peak | sha256 | load | notes |
|---|---|---|---|---|---|---|---|---|---|---|---|---|"""


def head(rows: list[dict]) -> list[str]:
    """Title, what each column is, the code the rows ran on, and how to re-run."""
    codes = sorted({(r["code"], r["commit"]) for r in rows})
    return [
        "# MSCCL XML at N = 512 and 1024 under msccl-executor's default limits (issue 28)", "",
        f"Rendered by `{COMMAND}` from the row files in `results/msccl_xml_n512_n1024/`; "
        "re-run that command to redo every row whose code version differs from the package's "
        "(`--n`, `--channels`, `--only-collective` select rows; `--dry-run` lists them). Every "
        "frontier point of `search --n N --d 4` × {allgather, reduce-scatter, allreduce} × K "
        "(`--channels K`). Default runtime msccl-executor: 64 steps per threadblock, 4095 XML "
        "elements per rank. One row at a time, each step a fresh process with an empty cache, "
        "on 2 cores shared with other sessions: CPU seconds are the figure to read.", "",
        "- **export**: `python3 -m topofinder export EXPR --what schedule --collective C "
        "--format xml --channels K -o F` under `/usr/bin/time`: user + system CPU s (wall s), "
        "peak resident memory; a refusal shows the exporter's one-line error. `--channel-mode` "
        "is left at auto: K instances, or one instance interleaved over K channels where K "
        "instances exceed the parser (the export says so on stderr: see notes).",
        "- **XML MB**, **sha256**: the written file (deleted after the check).",
        "- **steps/tb, tbs/rank, elements/rank**: the fullest threadblock, the most "
        "threadblocks on a rank, the most XML elements a rank loads, as "
        "`msccl.rules.check_limits` counts them on every rank.",
        "- **T_L, τ**: the replayed price on the export's stderr (τ in M/B).",
        "- **check**: `msccl.execution.check(F, 'msccl-executor', capacities=(1, 2))` in a fresh "
        "process: the parser's rules on every rank, then the execution model at connection "
        "capacity 1 and 2 with the collective's exact result; `ok` means all of it passed.",
        "- **load**: the 1-minute load average at the row's start; **notes**: any other "
        "line the export wrote on stderr.", "",
        "Code versions (package source hash, commit): "
        + ("; ".join(f"`{c}` at {m} ({sum(r['code'] == c for r in rows)} rows)"
                     for c, m in codes) or "none yet, no rows") + ".", ""]


def render(rows: list[dict]) -> list[str]:
    """The generated part of the markdown: header, one table per K, totals."""
    order = {c: i for i, c in enumerate(COLLECTIVES)}
    rows = sorted(rows, key=lambda r: (r["channels"], r["n"], r["index"], order[r["collective"]]))
    lines = head(rows)
    for k in sorted({r["channels"] for r in rows}):
        lines += [f"## K = {k}", "", HEADER]
        lines += [table_row(r) for r in rows if r["channels"] == k] + [""]
    count = {s: sum(r["status"] == s for r in rows) for s in ("ok", "refused", "failed")}
    cpu = sum(r["export"]["cpu_s"] + (r["check"] or {}).get("cpu_s", 0) for r in rows)
    lines += [f"**Totals:** {len(rows)} rows: {count['ok']} written and checked, "
              f"{count['refused']} refused, {count['failed']} failed; "
              f"{cpu / 60:.1f} CPU minutes (exports and checks).", ""]
    return lines


def write_table(out: Path) -> Path:
    """Render OUT.md from the rows in ``out``, keeping the text after the NOTES marker."""
    table = out.with_suffix(".md")
    rows = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    kept = table.read_text().partition(NOTES)[2] if table.exists() else "\n"
    table.write_text("\n".join(render(rows) + [NOTES]) + kept)
    return table


def main(argv=None) -> None:
    """Run the selected rows that are missing or stale, one at a time, re-rendering after each."""
    args = parse_args(argv)
    if not args.dry_run:
        args.out.mkdir(parents=True, exist_ok=True)
    code, commit = code_version(), subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        cwd=ROOT).stdout.strip()
    for n in args.n:
        frontier = [p.expr for p in search(n, 4).frontier] if not args.render_only else []
        for k in args.channels:
            for i, expr in enumerate(frontier):
                for coll in args.only_collective or COLLECTIVES:
                    path = row_path(args.out, n, expr, coll, k)
                    fresh = path.exists() and json.loads(path.read_text())["code"] == code
                    print(f"{'skip' if fresh else 'run '} N={n} K={k} {coll} {expr}", flush=True)
                    if fresh or args.dry_run:
                        continue
                    with tempfile.TemporaryDirectory(prefix="msccl_row") as scratch:
                        row = run_row(n, expr, coll, k, Path(scratch))
                    path.write_text(json.dumps({**row, "index": i, "code": code,
                                                "commit": commit}, indent=1) + "\n")
                    print(f"     {row['status']}", flush=True)
                    write_table(args.out)
    if not args.dry_run:
        print(write_table(args.out))


if __name__ == "__main__":
    main()
