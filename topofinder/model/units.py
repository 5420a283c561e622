"""Exact ratios in output: every ``*_exact`` field (and every τ stored as text) is spelled
``"p/q"``, denominator always present (``"1/1"``), so any reader splits on "/" or hands it to
``fractions.Fraction``. Units are in docs/model.md (T_L in steps of α, τ in M/B)."""

from __future__ import annotations

from fractions import Fraction


def exact(x) -> str:
    """``x`` (Fraction, int or "p/q" text) as "p/q"."""
    x = Fraction(x)
    return f"{x.numerator}/{x.denominator}"
