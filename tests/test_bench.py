"""`topofinder bench`: a case whose own check fails is reported and the others still run."""

from topofinder.batch import bench, bench_cases


def test_a_failing_case_is_recorded_and_the_rest_run(monkeypatch):
    ran = []

    def bad(_):
        ran.append("bad")
        raise AssertionError("gap 0.02 > 0.01")

    cases = [bench_cases.Case("zz bad case", 1.0, bad, repeat=3),
             bench_cases.Case("zz good case", 1.0, lambda _: ran.append("good"), repeat=2)]
    monkeypatch.setattr(bench, "CASES", cases)
    rows = bench.run(["zz"])["cases"]
    assert ran == ["bad", "good", "good"]          # no repeats after a failure
    assert rows[0]["meets_target"] is False and rows[0]["failed"] == "gap 0.02 > 0.01"
    assert rows[1]["meets_target"] is True and "failed" not in rows[1]


def test_rows_of_cases_that_no_longer_exist_leave_bench_json(tmp_path, monkeypatch):
    """A renamed or removed case's old median would read as a current figure: write drops it,
    keeps the other cases' rows and replaces the re-run ones."""
    path = tmp_path / "bench.json"
    cases = [bench_cases.Case("zz kept", 1.0, lambda _: None),
             bench_cases.Case("zz rerun", 1.0, lambda _: None)]
    monkeypatch.setattr(bench, "CASES", cases)
    old = {"cases": [{"name": "zz kept", "median_s": 1.0}, {"name": "zz rerun", "median_s": 2.0},
                     {"name": "zz renamed away", "median_s": 3.0}]}
    bench.write(old, path)
    bench.write({"cases": [{"name": "zz rerun", "median_s": 4.0}]}, path)
    rows = bench.read(path)["cases"]
    assert [(r["name"], r["median_s"]) for r in rows] == [("zz kept", 1.0), ("zz rerun", 4.0)]
