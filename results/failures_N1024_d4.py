"""Failures at N = 1024, d = 4 (issue 29): `fail` on every point of the verified frontier of
`search --n 1024 --d 4` (results/search_N1024_d4.json), timed, with a plot of intact vs median
vs worst single failure; and bypass re-patching of the worst and the median dead node of
paper 001 Table 7's N = 1024 topologies and the affine frontier points, against doing nothing.

Run from the repository root: python3 results/failures_N1024_d4.py
Writes results/fail_N1024_d4.json, results/fail_N1024_d4.png, results/failures_N1024_d4.md.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import topofinder as tf
from topofinder.export.plot import plot_failures

HERE = Path(__file__).resolve().parent
TABLE7 = ["Pi(4,1024)", "L^3(C(16,{3,4}))", "L^2(Diamond^2)", "L(DBJMod(2,4)^2)",
          "(UniRing(1,4) x UniRing(1,8))^2"]


def _row(s: dict) -> str:
    if s.get("disconnects"):
        return "disconnects | | | "
    return (f"{s['T_L']} | {s['tau_exact']} | {s.get('tau_fc_exact', '')} | "
            f"{s['allreduce_s'] * 1e6:.1f}")


def surveys(frontier: list[str]) -> tuple[list[dict], list[str]]:
    docs, lines = [], ["## `fail` on the frontier of `search --n 1024 --d 4`", "",
                       "| topology | |Aut| | fibre orbits | node orbits | wall s | CPU s | "
                       "intact µs | worst fibre µs (×) | median fibre µs | worst node µs (×) "
                       "| median node µs |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for expr in frontier:
        wall, cpu = time.perf_counter(), time.process_time()
        doc = tf.fail(expr)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        doc["seconds"] = {"wall": wall, "cpu": cpu, "load": os.getloadavg()[0]}
        docs.append(doc)
        li, no = doc["single_links"], doc["single_nodes"]

        def us(r):
            return "disconnects" if r.get("disconnects") else f"{r['allreduce_s'] * 1e6:.1f}"

        def x(r):
            return "" if r.get("regression") is None else f" (×{r['regression']:.3f})"
        lines.append(f"| {expr} | {doc['automorphisms']} | {li['orbits']} | {no['orbits']} | "
                     f"{wall:.1f} | {cpu:.1f} | {doc['intact']['allreduce_s'] * 1e6:.1f} | "
                     f"{us(li['worst'])}{x(li['worst'])} ({li['worst']['failure']}) | "
                     f"{us(li['median'])} | {us(no['worst'])}{x(no['worst'])} (node "
                     f"{no['worst']['failure']}) | {us(no['median'])} |")
    return docs, lines


def bypasses(exprs: list[str]) -> list[str]:
    lines = ["## Bypass re-patching of a dead node (worst and median node by orbits)", "",
             "T_L, τ (BFB allgather, M/B), τ_fc (M/B), allreduce (µs; α = 10 µs, B = "
             "100 Gbps, M = 1 MB). *nothing*: the survivors as left; *re-patched*: the best "
             "of all 4! matchings of the dead node's in- to out-neighbours.", "",
             "| topology | dead node | intact T_L, τ, τ_fc, µs | nothing | re-patched | "
             "fibres patched | s |", "|---|---|---|---|---|---|---|"]
    for expr in exprs:
        nodes = tf.fail(expr, links=0)["single_nodes"]
        picks = [("worst", nodes["worst"]["failure"])]
        if nodes["median"]["failure"] != nodes["worst"]["failure"]:
            picks.append(("median", nodes["median"]["failure"]))
        for which, node in picks:
            start = time.perf_counter()
            doc, _ = tf.bypass(expr, int(node))
            lines.append(f"| {expr} | {node} ({which}) | {_row(doc['intact'])} | "
                         f"{_row(doc['nothing'])} | {_row(doc['repatched'])} | "
                         f"{', '.join(doc['fibres'])} | {time.perf_counter() - start:.1f} |")
            if nodes["worst"]["failure"] == nodes["median"]["failure"]:
                break
    return lines


def main() -> None:
    search = json.loads((HERE / "search_N1024_d4.json").read_text())
    frontier = [p["expr"] for p in search["frontier"]]
    docs, lines = surveys(frontier)
    (HERE / "fail_N1024_d4.json").write_text(json.dumps(docs, indent=1) + "\n")
    plot_failures(docs, str(HERE / "fail_N1024_d4.png"))
    affine = [e for e in frontier if "Aff" in e]
    lines += [""] + bypasses(TABLE7 + affine)
    head = ["# Failures at N = 1024, d = 4", "",
            "Made by `python3 results/failures_N1024_d4.py` (issue 29; docs/algorithms.md "
            "\"Failures\"). Every single fibre and node failure is covered, exactly, one per "
            "automorphism orbit; times are BFB allreduce (both phases), α = 10 µs, "
            "B = 100 Gbps, M = 1 MB; × = degraded / intact. Load average while it ran: "
            f"{os.getloadavg()[0]:.1f} on 2 cores (wall times include waiting for the CPU).", ""]
    (HERE / "failures_N1024_d4.md").write_text("\n".join(head + lines) + "\n")


if __name__ == "__main__":
    main()
