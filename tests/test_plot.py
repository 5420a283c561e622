"""Frontier plot: files written headless, bounds from theory, recommendation highlighted."""

import numpy as np
import pytest

from topofinder.errors import TopofinderError
from topofinder.export.plot import plot_frontier
from topofinder.model.bounds import moore_bound_steps as moore_T_L

RESULT = {   # paper 001 Table 7, N = 1024, d = 4 (τ in M/B)
    "N": 1024, "d": 4, "workload": {"alpha": "10us", "bandwidth": "100Gbps", "size": "1MB"},
    "frontier": [
        {"expr": "Pi(4,1024)", "T_L": 5, "tau": 1.332, "tau_fc": 1.1, "diameter": 5},
        {"expr": "L^3(C(16,{3,4}))", "T_L": 6, "tau": 1.0195, "tau_fc": 0.9991,
         "allreduce_time_s": 2 * (60 + 1.0195 * 83.886) * 1e-6},   # DESIGN §1: 291.0 µs
        {"expr": "L^2(Diamond^2)", "T_L": 8, "tau": 1.004, "tau_fc": None},
        {"expr": "L(DBJMod(2,4)^2)", "T_L": 11, "tau": 1.000},
        {"expr": "(UniRing(1,4) x UniRing(1,8))^2", "T_L": 20, "tau": 0.9991},
    ],
    "recommended": 1,
}


@pytest.mark.parametrize("n, d", [(1024, 4), (1000, 4), (32, 4), (64, 2), (7, 1), (2, 1),
                                  (341, 4), (342, 4), (2000, 16)])
def test_moore_bound_matches_brute_force(n, d):
    k = next(k for k in range(n) if sum(d ** i for i in range(k + 1)) >= n)
    assert moore_T_L(n, d) == k


def test_moore_bound_reference_values():
    assert moore_T_L(1024, 4) == 5     # Pi(4,1024) is Moore-optimal at T_L = 5 (Table 7)
    assert moore_T_L(32, 4) == 3       # L(K(4,4)) at T_L = 3 (Table 7)


def test_png_has_recommendation_highlighted(tmp_path):
    from matplotlib.image import imread
    path = tmp_path / "frontier.png"
    plot_frontier(RESULT, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = imread(path)[..., :3]
    red = np.all(np.abs(img - np.array([214, 39, 40]) / 255) < 0.03, axis=-1)
    assert red.sum() > 100             # the recommended star (tab:red) is drawn


def test_svg_has_labels_bounds_and_recommendation(tmp_path):
    path = tmp_path / "frontier.svg"
    plot_frontier(RESULT, str(path))
    text = path.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    for p in RESULT["frontier"]:
        assert p["expr"] in text
    assert "recommended: L^3(C(16,{3,4})) (allreduce 291.0 µs)" in text
    assert "workload: α = 10us, B = 100Gbps, M = 1MB" in text
    assert "Moore bound T_L* = 5" in text
    assert f"{1023 / 1024:.5f}" in text


def test_without_recommendation_and_empty_frontier(tmp_path):
    res = dict(RESULT, recommended=None)
    plot_frontier(res, str(tmp_path / "a.png"))
    plot_frontier({"N": 64, "d": 4, "frontier": []}, str(tmp_path / "b.svg"))
    assert "Moore bound T_L* = 3" in (tmp_path / "b.svg").read_text()


@pytest.mark.parametrize("res, path, what", [
    (RESULT, "x.pdf", "accepted are .png, .svg"),
    ({"N": 4}, "x.png", "needs N, d"),
    (dict(RESULT, recommended=9), "x.png", "not an index"),
    ({"N": 8, "d": 2, "frontier": [{"expr": "A", "T_L": "x", "tau": 1}]}, "x.png", "needs"),
])
def test_bad_input(tmp_path, res, path, what):
    with pytest.raises(TopofinderError, match=what):
        plot_frontier(res, str(tmp_path / path))
