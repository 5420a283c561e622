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
