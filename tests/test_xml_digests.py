"""The MSCCL XML `export --format xml` writes, pinned byte for byte by sha256.

The digests in tests/data/msccl_xml_digests.json were written by main at 2bfca70 (the
lowering, lanes, fit checks and emitter all in export/schedule_xml.py), before the split into
a runtime-independent rank-program IR and the MSCCL emitter package: a refactor of the writer
changes no byte. A deliberate change of the output regenerates the file (each entry is one
`export EXPR --what schedule --collective COLL --kind KIND --format xml` with the listed
options, through :func:`topofinder.api.export_schedule_of`, as the CLI calls it)."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import topofinder as tf
from topofinder.errors import TopofinderError

_REF = json.loads((Path(__file__).parent / "data" / "msccl_xml_digests.json").read_text())


def _digest(expr: str, coll: str, kind: str, opt: int) -> str:
    _, text = tf.export_schedule_of(expr, "xml", None, collective=coll, kind=kind,
                                    **_REF["options"][opt])
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("expr", _REF["expressions"])
def test_small_exports_are_byte_identical(expr):
    """Allgather, reduce-scatter and allreduce; step schedules and trees; in and out of
    place; one, two and three channels as instances, interleaved or either (auto); staged
    through scratch or never; lanes forced by a small step limit (and refusals under a
    limit of 3 steps): every export of ``expr`` hashes to the recorded digest, or is refused
    with the recorded text."""
    keys = sorted(k for k in {*_REF["sha256"], *_REF["refused"]} if k.split("|")[0] == expr)
    assert len(keys) == len(_REF["options"]) * 3 + len(_REF["tree_options"]) * 3
    for key in keys:
        _, coll, kind, opt = key.split("|")
        try:
            got = _digest(expr, coll, kind, int(opt))
        except TopofinderError as exc:
            assert _REF["refused"].get(key) == str(exc), key
            continue
        assert _REF["sha256"].get(key) == got, key


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(_REF["n1024"]))
def test_the_n1024_recommended_exports_are_byte_identical(key, tmp_path):
    """The recommended point of `search --n 1024 --d 4`, L^3(C(16,{1,6})): its allreduce at
    --channels 1 (one program) and 2 (interleaved), allgather and reduce-scatter, written by
    the CLI as a user runs it, hash to the digests main wrote (about 20 s each)."""
    coll, k = key.split("|")
    out = tmp_path / "schedule.xml"
    subprocess.run([sys.executable, "-m", "topofinder", "export", "L^3(C(16,{1,6}))",
                    "--what", "schedule", "--collective", coll, "--format", "xml",
                    "--channels", k, "-o", str(out)], check=True, capture_output=True)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == _REF["n1024"][key]
