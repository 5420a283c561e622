"""Sweep tables price the allreduce that is exported (issue 27): best.csv's allreduce time of
every row equals the time of the replayed exported allreduce schedule (reduce-scatter as
exported — BFB on G^T when G is not reverse-symmetric — plus allgather), at ≥ 50 sizes N."""

import csv
from fractions import Fraction

import topofinder as tf
from topofinder.batch import sweep
from topofinder.model.schedule import validate
from topofinder.workload.cost import Workload

#: 53 sizes N at d = 2 and d = 4, two message sizes: 212 rows of best.csv.
SPEC = ('name = "pricing"\ndegrees = [2, 4]\nn_min = 8\nn_max = 60\n'
        '[workload]\nsizes = ["1MB", "100MB"]\n')


def test_best_csv_prices_the_replayed_exported_allreduce(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "s.toml").write_text(SPEC)
    out, failed = sweep.run_sweep(sweep.load_spec(tmp_path / "s.toml"), tmp_path, jobs=1,
                                  use_cache=False, progress=False)
    assert not failed
    rows = list(csv.DictReader(open(out / "best.csv")))
    assert len({r["N"] for r in rows}) >= 50
    not_twice = 0
    for r in rows:
        exported = tf.schedule(r["expr"], collective="allreduce")
        validate(exported)                               # replayed: it computes the allreduce
        seconds = Workload.from_strings(size=r["size"]).collective_time(
            exported.num_steps, float(exported.tau))
        assert float(r["allreduce_time_s"]) == seconds, r
        assert (exported.num_steps, exported.tau) == (int(r["allreduce_T_L"]),
                                                      Fraction(r["allreduce_tau_exact"]))
        not_twice += exported.tau != 2 * tf.schedule(r["expr"]).tau
    assert not_twice                  # rows where pricing as twice the allgather was wrong
