"""`topofinder search`: the verified frontier against paper 001 Table 7 and the theorems."""

import json
from fractions import Fraction

import pytest

from topofinder.cli.main import main
from topofinder.finder.frontier import predicted_frontier
from topofinder.workload.rank import search
from topofinder.model.bounds import moore_bound_steps

# paper 001 Table 7 (d = 4): (T_L in steps, τ in M/B) of every Pareto point it lists
TABLE7 = {
    32: [(3, 1.000), (4, 0.969)],
    64: [(3, 1.312), (4, 1.000), (6, 0.984)],
    128: [(4, 1.031), (5, 1.000), (10, 0.992)],
    256: [(4, 1.328), (5, 1.016), (7, 1.000), (10, 0.996)],
    512: [(5, 1.039), (6, 1.008), (11, 1.000), (16, 0.998)],
    1024: [(5, 1.332), (6, 1.020), (8, 1.004), (11, 1.000), (20, 0.999)],
}


@pytest.fixture(scope="module")
def frontiers():
    return {n: search(n, 4, jobs=2, use_cache=False).to_dict() for n in TABLE7}


@pytest.mark.parametrize("n", sorted(TABLE7))
def test_reaches_or_dominates_table7(frontiers, n):
    points = frontiers[n]["frontier"]
    for t_l, tau in TABLE7[n]:
        assert any(p["T_L"] <= t_l and p["tau"] <= tau + 0.0005 for p in points), (n, t_l, tau)


def test_default_search_strictly_dominates_a_table7_point_at_1024(frontiers):
    """Issue 18: the affine catalog's L^2(Aff(64,...)) is a verified (7, 1) point at N = 1024,
    one step fewer than Table 7's (8, 1.004) at a lower τ (and four fewer than (11, 1.000))."""
    points = frontiers[1024]["frontier"]
    best = [p for p in points if p["verified"] and p["T_L"] <= 7
            and Fraction(p["tau_exact"]) <= 1 and "Aff(" in p["expr"]]
    assert best, [(p["expr"], p["T_L"], p["tau"]) for p in points]


@pytest.mark.parametrize("n", sorted(TABLE7))
def test_frontier_is_pareto_verified_and_named(frontiers, n):
    result = frontiers[n]
    points = result["frontier"]
    for p in points:
        assert p["verified"] and p["schedule"].removesuffix("+kstep") in {
            "bfb", "line-graph", "degree", "cartesian-power", "catalog", "bidirectional",
            "kstep"}
        # every number is the replayed schedule's: exact τ as p/q, T_L ≥ diameter (Thm 3)
        assert abs(float(Fraction(p["tau_exact"])) - p["tau"]) < 1e-12
        assert p["T_L"] >= p["diameter"] and p["T_L"] >= moore_bound_steps(n, 4)
        # ForestColl's optimum is a lower bound on every schedule's T_B (paper 002 Thm 1)
        assert Fraction(p["tau_fc_exact"]) <= Fraction(p["tau_exact"])
        assert Fraction(p["tau_exact"]) >= Fraction(n - 1, n)
        assert p["alltoall_f"] is None or 0 < p["alltoall_f"] <= p["alltoall_f_upper"] * (1 + 1e-9)
        assert p["alltoall_f_upper"] <= p["alltoall_bound"] * (1 + 1e-9)
    for a in points:
        for b in points:
            if a is not b:
                assert not (a["T_L"] <= b["T_L"] and a["tau"] <= b["tau"]), (a, b)
    best = points[result["recommended"]]
    assert best["objective_s"] == min(p["objective_s"] for p in points)


def test_paper_table4_recommendation_at_1mb(frontiers):
    # α = 10 µs, M/B = 1 MB/100 Gbps: L^3(C(16,{3,4})) (6, 1.0195) is the best, 291.0 µs
    best = frontiers[1024]["frontier"][frontiers[1024]["recommended"]]
    assert (best["T_L"], round(best["tau"], 4)) == (6, 1.0195)
    assert best["allreduce_time_s"] * 1e6 == pytest.approx(291.0, abs=0.1)


@pytest.mark.parametrize("d,ns", [(2, [7, 16, 100, 257]), (3, [10, 64, 343]),
                                  (8, [50, 81, 512]), (16, [17, 64, 100])])
def test_moore_and_bandwidth_points_exist(d, ns):
    """Thm 21: Π_{d,N} is within one step of the Moore bound; App. F.4: an even-degree
    circulant is BW-optimal by BFB — so the frontier always has both kinds of point."""
    for n in ns:
        frontier = predicted_frontier(n, d, use_cache=False, jobs=1)
        assert any(c.t_l <= moore_bound_steps(n, d) + 1 for c in frontier), (n, d)
        if d % 2 == 0:
            assert any(c.tau == Fraction(n - 1, n) for c in frontier), (n, d)


def test_bidirectional_only_keeps_duplex_topologies():
    result = search(64, 4, bidirectional=True, jobs=1, use_cache=False).to_dict()
    assert result["frontier"] and all(p["bidirectional"] for p in result["frontier"])


def test_search_json_cli(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TOPOFINDER_CACHE", str(tmp_path / "cache"))
    assert main(["search", "--n", "32", "--d", "4", "--json", "--jobs", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"N", "d", "workload", "frontier", "recommended"} <= set(doc)
    for field in ("expr", "T_L", "tau", "tau_fc", "diameter", "schedule", "verified",
                  "allreduce_time_s"):
        assert field in doc["frontier"][0]


@pytest.mark.parametrize("argv", [["--n", "1", "--d", "1"], ["--n", "8", "--d", "0"],
                                  ["--n", "8", "--d", "8"], ["--n", "8.5", "--d", "2"],
                                  ["--n", "8", "--d", "two"],
                                  ["--n", "9", "--d", "3", "--bidirectional"],
                                  ["--n", "8", "--d", "2", "--alpha", "fast"],
                                  ["--n", "8", "--d", "2", "--jobs", "0"]])
def test_bad_search_input_is_one_line_exit_2(capsys, argv):
    assert main(["search", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _killed_by_the_os(_):
    """What the kernel's out-of-memory killer does to a worker."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_one_clear_error():
    """A worker killed by the OS surfaces as a user-facing error, not an executor traceback."""
    from topofinder.errors import TopofinderError
    from topofinder.compute.parallel import run_parallel

    with pytest.raises(TopofinderError, match="ran out of memory or was killed"):
        run_parallel(_killed_by_the_os, [1, 2], jobs=2)
