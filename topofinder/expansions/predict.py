"""Exact predictions of the expansions (paper 001 Thms 7, 10–13, Appendix A.6): the base's
(N, d, T_L, τ) → the expanded topology's (N', d', T_L', τ'); T_L in steps, τ in M/B, exact
fractions. The finder grows its frontier with these before anything is built."""

from __future__ import annotations

from fractions import Fraction
from math import prod
from typing import Sequence

from topofinder.errors import TopofinderError


def _check_base(n: int, d: int, t_l: int, tau) -> None:
    if n < 2 or d < 1 or t_l < 1 or Fraction(tau) <= 0:
        raise TopofinderError(f"a base needs N >= 2, d >= 1, T_L >= 1 and tau > 0; got "
                              f"N={n}, d={d}, T_L={t_l}, tau={tau}")


def predict_line_graph(n: int, d: int, t_l: int, tau, times: int = 1):
    """L^times(G) (Thm 7, 10, Cor 10.1): N' = d^times·N, d' = d, T_L' = T_L + times,
    τ' = τ + d/(d−1)·(1/N − 1/(d^times·N)) (τ + times/N for d = 1). Exact for a BFB base whose
    out-neighbourhoods all exceed one node; an upper bound (T_L' and τ') otherwise."""
    _check_base(n, d, t_l, tau)
    if times < 1:
        raise TopofinderError(f"line-graph power must be >= 1, got {times}")
    big = d ** times * n
    extra = (Fraction(times, n) if d == 1
             else Fraction(d, d - 1) * (Fraction(1, n) - Fraction(1, big)))
    return big, d, t_l + times, Fraction(tau) + extra


def predict_degree_expansion(n: int, d: int, t_l: int, tau, factor: int):
    """G*n for a d-regular G without self-loops (Thm 11): (nN, nd, T_L + 1, τ + (n−1)/(nN));
    exact."""
    _check_base(n, d, t_l, tau)
    if factor < 2:
        raise TopofinderError(f"degree expansion factor must be >= 2, got {factor}")
    return factor * n, factor * d, t_l + 1, Fraction(tau) + Fraction(factor - 1, factor * n)


def predict_cartesian_power(n: int, d: int, t_l: int, tau, power: int):
    """G^n (Thm 12): (N^n, n·d, n·T_L, τ·N/(N−1)·(N^n−1)/N^n); exact."""
    _check_base(n, d, t_l, tau)
    if power < 2:
        raise TopofinderError(f"Cartesian power must be >= 2, got {power}")
    big = n ** power
    return (big, power * d, power * t_l,
            Fraction(tau) * Fraction(n, n - 1) * Fraction(big - 1, big))


def predict_product(factors: Sequence[tuple]):
    """G_1 x ... x G_k scheduled by BFB (Thm 13), from factors (N_i, d_i, T_L_i): the caller
    vouches that every G_i is a nontrivial simple digraph whose BFB schedule (T_L_i = D(G_i)) is
    BW-optimal. Then (ΠN_i, Σd_i, ΣT_L_i, (ΠN_i − 1)/ΠN_i); exact."""
    if len(factors) < 2:
        raise TopofinderError("a Cartesian product needs at least two factors")
    for f in factors:
        _check_base(f[0], f[1], f[2], Fraction(f[0] - 1, f[0]))
    big = prod(f[0] for f in factors)
    return big, sum(f[1] for f in factors), sum(f[2] for f in factors), Fraction(big - 1, big)


def predict_bidirectional(n: int, d: int, t_l: int, tau):
    """Bi(G) for reverse-symmetric G (Appendix A.6): (N, 2d, T_L, τ); exact when G has no
    2-cycles (G and G^T then share no link), an upper bound otherwise."""
    _check_base(n, d, t_l, tau)
    return n, 2 * d, t_l, Fraction(tau)
