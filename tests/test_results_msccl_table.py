"""results/msccl_xml_n512_n1024.py renders issue 28's table from row files: two fake rows (one
written and checked, one refused) give the expected markdown lines, and a refusal is told
apart from a crash."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "results" / "msccl_xml_n512_n1024.py"
_spec = importlib.util.spec_from_file_location("msccl_table", SCRIPT)
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)


def _rows() -> list[dict]:
    common = {"n": 512, "channels": 1, "code": "c0de", "commit": "abc1234", "load": 3.5}
    written = {**common, "expr": "L^3(K(4,4))", "collective": "allreduce", "index": 0,
               "export": {"rc": 0, "cpu_s": 15.66, "wall_s": 31.2, "peak_gb": 0.674,
                          "bytes": 144_300_000, "sha256": "c0db4ef07b" + "0" * 54,
                          "stderr": ["MSCCL XML: 144.3 MB, writing F",
                                     "MSCCL XML: ...; replayed α-β time ... (T_L = 12, τ = 261/128) + ...",
                                     "note: two instances interleaved"]},
               "check": {"rc": 0, "cpu_s": 58.44, "peak_gb": 0.9,
                         "stats": {"max_steps_per_tb": 58, "max_tbs_per_gpu": 57,
                                   "max_nodes_per_rank": 3544}}}
    refused = {**common, "expr": "L^3(K(4,4))", "collective": "allgather", "index": 0,
               "export": {"rc": 2, "cpu_s": 2.0, "wall_s": 2.4, "peak_gb": 0.34, "stderr": [
                   "topofinder: error: a rank would load at least 5137 XML elements"]},
               "check": None}
    for row in (written, refused):
        row["status"] = table.status(row)
    return [written, refused]


def test_render_two_rows_in_frontier_and_collective_order():
    lines = table.render(_rows())
    at = lines.index("## K = 1")
    assert lines[at + 3:at + 5] == [
        "| 512 | L^3(K(4,4)) | allgather | refused in 2.0 s, 0.34 GB — a rank would load at "
        "least 5137 XML elements |  |  |  |  |  |  |  | 3.50 |  |",
        "| 512 | L^3(K(4,4)) | allreduce | 15.7 (31), 0.67 GB | 144.3 | 58 | 57 | 3544 | "
        "12, 261/128 | ok, 58.4 s, 0.90 GB | `c0db4ef07b` | 3.50 | note: two instances "
        "interleaved |"]
    assert ("**Totals:** 2 rows: 1 written and checked, 1 refused, 0 failed; 1.3 CPU minutes "
            "(exports and checks).") in lines
    assert "`c0de` at abc1234 (2 rows)" in " ".join(lines)


def test_a_crash_or_a_failed_check_is_not_a_refusal():
    written, refused = _rows()
    crashed = {**refused, "export": {**refused["export"], "rc": 1,
                                     "stderr": ["Traceback ...", "MemoryError"]}}
    failed = {**written, "check": {"rc": 0, "cpu_s": 1.0, "error": "deadlock at capacity 1"}}
    assert [table.status(r) for r in (written, refused, crashed, failed)] == \
        ["ok", "refused", "failed", "failed"]
    assert "FAILED in 1.0 s: deadlock at capacity 1" in table.table_row(failed)
