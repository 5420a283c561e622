"""The finder's search space and Pareto pruning (paper 001 §5.4)."""

import random
from fractions import Fraction

import pytest

from topofinder.finder import growth
from topofinder.errors import TopofinderError
from topofinder.finder.growth import Candidate, pareto
from topofinder.finder.recipe import apply, base


def _forward_sizes(n, k, op, arg=None):
    """The (N, d) an expansion produces (paper 001 Table 4 / DESIGN §5)."""
    if op == "line":
        return k * n, k
    if op == "bi":
        return n, 2 * k
    return (arg * n, arg * k) if op == "degree" else (n ** arg, arg * k)


@pytest.mark.parametrize("target", [(1024, 4), (256, 4), (64, 4), (512, 4), (96, 6), (81, 4)])
def test_every_predecessor_grows_back_to_its_state(target):
    for state in growth.reachable_states(*target):
        for op in growth.predecessors(*state):
            if op[0] == "product":
                (a, b) = op[1]
                assert (a[0] * b[0], a[1] + b[1]) == state
            else:
                assert _forward_sizes(*op[1][0], op[0], op[2] if len(op) > 2 else None) == state


def test_reachable_sizes_for_1024_4():
    states = set(growth.reachable_states(1024, 4))
    # bases of paper 001 Table 7 at N = 1024: C(16,{3,4}) (L^3), Diamond (L^2 of its square),
    # DBJMod(2,4) (L of its square), UniRing(1,4) and UniRing(1,8) (product, squared)
    assert {(16, 4), (8, 2), (16, 2), (4, 1), (8, 1), (32, 2), (64, 4), (256, 4)} <= states
    # 32·4 = 128 and 512·4 = 2048 lead nowhere near 1024 with degree 4
    assert (32, 4) not in states and (512, 4) not in states
    assert all(1024 % n == 0 and 1 <= k <= 4 for n, k in states)


def _cand(t_l, tau, name, **flags):
    return Candidate(base(name), 16, 4, t_l, Fraction(tau), **flags)


def test_pareto_matches_brute_force_on_random_points():
    rng = random.Random(7)
    for _ in range(50):
        pts = [_cand(rng.randint(1, 6), Fraction(rng.randint(10, 20), 16), f"G{i}")
               for i in range(rng.randint(1, 12))]
        front = pareto(pts, with_flags=False)
        values = {(c.t_l, c.tau) for c in front}
        brute = {(c.t_l, c.tau) for c in pts
                 if not any((o.t_l <= c.t_l and o.tau <= c.tau) and (o.t_l, o.tau) != (c.t_l, c.tau)
                            for o in pts)}
        assert values == brute and len(front) == len(values)   # one point per value pair


def test_flags_protect_candidates_needed_later():
    plain = _cand(3, "1", "A")
    symmetric = _cand(4, "1", "B", reverse_symmetric=True)
    assert {c.expr for c in pareto([plain, symmetric])} == {"A", "B"}
    assert {c.expr for c in pareto([plain, symmetric], with_flags=False)} == {"A"}


def test_recipe_expressions():
    d = base("Diamond", "catalog")
    square = apply("power", (d,), 2)
    assert apply("line", (apply("line", (square,)),)).expr == "L^2(Diamond^2)"
    rings = apply("product", (base("UniRing(1,4)"), base("UniRing(1,8)")))
    assert apply("power", (rings,), 2).expr == "(UniRing(1,4) x UniRing(1,8))^2"
    assert apply("product", (rings, base("K(3)"))).children == (*rings.children, base("K(3)"))
    assert apply("degree", (square,), 2).expr == "Diamond^2*2"
    assert apply("line", (square,)).method == "line-graph" and d.method == "catalog"


@pytest.mark.parametrize("n,d,bi", [("1", "1", False), ("8", "0", False), ("8", "8", False),
                                    ("8.5", "2", False), ("x", "2", False), ("9", "3", True),
                                    ("8", "1", True), ("2000000", "4", False)])
def test_bad_targets(n, d, bi):
    with pytest.raises(TopofinderError):
        growth.validate_target(n, d, bi)


def _unpruned_frontier(n, d):
    """Every reachable size, every expansion, no limits: the search space by brute force."""
    from topofinder.finder.bases import base_expressions
    from topofinder.finder.frontier import _candidate_from_score
    from topofinder.finder.verify import score_base

    frontiers = {}
    for state in growth.reachable_states(n, d):
        scores = [score_base(e, s) for e, s in base_expressions(*state, at_target=state == (n, d))]
        own = [_candidate_from_score(s) for s in scores if s is not None]
        frontiers[state] = pareto(own + growth.grow(frontiers, *state))
    return pareto(frontiers[(n, d)], with_flags=False)


@pytest.mark.parametrize("n,d", [(64, 4), (256, 4), (96, 6), (60, 8), (128, 2), (81, 4),
                                 (200, 16)])
def test_limit_pruning_keeps_the_exact_frontier(n, d):
    from topofinder.finder.frontier import predicted_frontier

    pruned = predicted_frontier(n, d, jobs=1, use_cache=False)
    full = _unpruned_frontier(n, d)
    assert [(c.t_l, c.tau) for c in pruned] == [(c.t_l, c.tau) for c in full]
