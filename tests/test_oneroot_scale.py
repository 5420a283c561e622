"""One-port and node-capacity broadcast on random heterogeneous directed platforms (issue
40): cut generation on a warm LP (steady.lp_broadcast) against an independent sparse SSB LP
(paper 003 §5.2, one flow per destination, written here separately), and its exact
certificate checked again here: the rates meet every port row and min_v maxflow ≥ TP in
integers (networkx), and the bound is a port row or an exactly dual-feasible LP dual."""

from fractions import Fraction
from math import lcm

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

import topofinder.scoring.oneroot.steady as steady
from topofinder.families.hetero import CAPACITIES, random_platform
from topofinder.scoring.oneroot.platform import from_topology


def sparse_ssb(pl) -> float:
    """max TP: x_k a flow of value TP root → k for every destination k, x_k,e ≤ n_e, port
    rows on n (``one``: Σ n_e/C_e ≤ 1 per node and direction; ``node``: n_e ≤ C_e and
    Σ n_e ≤ B). Columns [n (m)] [TP] [x_k (m) for each k]."""
    n, m = pl.n, pl.m
    dests = [v for v in range(n) if v != pl.root]
    ncol = m + 1 + len(dests) * m
    rows, cols, vals, b_ub = [], [], [], []
    eq_r, eq_c, eq_v = [], [], []
    r = 0
    for k, t in enumerate(dests):
        base = m + 1 + k * m
        for e in range(m):                      # x_k,e - n_e <= 0
            rows += [r, r]
            cols += [base + e, e]
            vals += [1, -1]
            b_ub.append(0)
            r += 1
        for v in range(n):                      # in - out = TP at t, 0 elsewhere (not root)
            if v == pl.root:
                continue
            row = (k * n + v)
            for e in np.flatnonzero(pl.dst == v):
                eq_r.append(row), eq_c.append(base + e), eq_v.append(1)
            for e in np.flatnonzero(pl.src == v):
                eq_r.append(row), eq_c.append(base + e), eq_v.append(-1)
            if v == t:
                eq_r.append(row), eq_c.append(m), eq_v.append(-1)
    coef = 1 / pl.cap if pl.port_model == "one" else np.ones(m)
    cap = 1.0 if pl.port_model == "one" else float(pl.bandwidth)
    for ends in (pl.src, pl.dst):
        for v in range(n):
            es = np.flatnonzero(ends == v)
            rows += [r] * es.size
            cols += es.tolist()
            vals += coef[es].tolist()
            b_ub.append(cap)
            r += 1
    if pl.port_model == "node":
        for e in range(m):
            rows.append(r), cols.append(e), vals.append(1)
            b_ub.append(float(pl.cap[e]))
            r += 1
    a_ub = sp.csr_matrix((vals, (rows, cols)), shape=(r, ncol))
    a_eq = sp.csr_matrix((eq_v, (eq_r, eq_c)), shape=(len(dests) * n, ncol))
    c = np.zeros(ncol)
    c[m] = -1
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.zeros(a_eq.shape[0]),
                  bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


def check_primal(pl, res) -> None:
    """The rates meet the port rows exactly and carry TP to every node (integer max-flow)."""
    rates = [Fraction(x) for x in res.rates]
    coef = [Fraction(1, int(c)) for c in pl.cap] if pl.port_model == "one" else [1] * pl.m
    bound = 1 if pl.port_model == "one" else pl.bandwidth
    for ends in (pl.src, pl.dst):
        load = [Fraction(0)] * pl.n
        for e, x in enumerate(rates):
            load[int(ends[e])] += coef[e] * x
        assert max(load) <= bound
    if pl.port_model == "node":
        assert all(x <= int(c) for x, c in zip(rates, pl.cap))
    den = lcm(res.value.denominator, *(x.denominator for x in rates))
    g = nx.DiGraph()
    for e, x in enumerate(rates):
        g.add_edge(int(pl.src[e]), int(pl.dst[e]), capacity=int(x * den))
    assert min(nx.maximum_flow_value(g, pl.root, v) for v in range(pl.n)
               if v != pl.root) >= res.value * den


CASES = [(n, seed, pm) for n in (8, 16, 24, 32) for seed in range(4)
         for pm in ("one", "node")] + [(64, 0, "one"), (64, 1, "node")]


@pytest.mark.parametrize("n,seed,port_model", CASES)
def test_cut_generation_equals_independent_ssb(n, seed, port_model):
    pl = from_topology(random_platform(n, 4, seed), 0, port_model,
                       3 if port_model == "node" else None)
    res = steady.lp_broadcast(pl)
    assert float(res.value) == pytest.approx(sparse_ssb(pl), rel=1e-7)
    check_primal(pl, res)
    if res.certificate["kind"] == "port-row":
        assert res.value == steady.port_bound(pl)[0]


def test_both_certificates_occur():
    """The cases above reach both ends of lp_broadcast: a port-row bound and an LP dual."""
    kinds = set()
    for n, seed, pm in CASES:
        pl = from_topology(random_platform(n, 4, seed), 0, pm, 3 if pm == "node" else None)
        kinds.add(steady.lp_broadcast(pl).certificate["kind"])
    assert kinds == {"port-row", "lp-dual"}


def test_generator_is_a_seeded_ring_plus_random_arcs():
    a, b = random_platform(50, 4, 7), random_platform(50, 4, 7)
    assert a.same_arcs(b) and not a.same_arcs(random_platform(50, 4, 8))
    assert np.all(a.out_degrees == 4) and a.strongly_connected
    assert set(a.arc_capacity.tolist()) <= set(CAPACITIES)
    ring = set(zip(range(50), [(i + 1) % 50 for i in range(50)]))
    assert ring <= set(zip(a.src.tolist(), a.dst.tolist()))


@pytest.mark.slow
@pytest.mark.parametrize("n", [512, 1024])
def test_large_platform_certified(n):
    pl = from_topology(random_platform(n, 4, 0), 0, "one")
    res = steady.throughput(pl)
    check_primal(pl, res)
    assert res.value <= steady.port_bound(pl)[0]


def _schedule_replays(n: int, seed: int) -> None:
    from topofinder.model.oneroot_schedule import replay
    from topofinder.scoring.oneroot.summary import oneroot_schedule
    topo = random_platform(n, 4, seed)
    sched = oneroot_schedule(topo, "broadcast", 0, "one")
    tp = steady.throughput(from_topology(topo, 0, "one")).value
    assert sched.throughput == tp and replay(sched).throughput == tp


def test_heterogeneous_schedule_replays_to_tp():
    """Weighted trees and one-port matchings of a heterogeneous platform whose optimum is
    not one tree (seed 1 at N = 32: TP 2, best tree 10/7), replayed to TP."""
    _schedule_replays(32, 1)


@pytest.mark.slow
def test_n1024_schedule_replays_to_tp():
    """Issue 40: the periodic schedule of an N = 1024 heterogeneous platform (minutes, 2.5 GB)."""
    _schedule_replays(1024, 1)
