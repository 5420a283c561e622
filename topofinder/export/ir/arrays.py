"""Array helpers the lowering passes share (index arithmetic on numpy int64 arrays)."""

from __future__ import annotations

import numpy as np


def stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for non-negative int64 keys small enough to make
    key·size + position unique (an unstable sort of unique keys is faster)."""
    return np.argsort(key * key.size + np.arange(key.size))


def in_runs(lengths: np.ndarray) -> np.ndarray:
    """Per item of consecutive runs of ``lengths`` items, its index in its run."""
    lengths = np.asarray(lengths, np.int64)
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def within(new: np.ndarray) -> np.ndarray:
    """Per item, its index in its group (a group starts where ``new``)."""
    pos = np.arange(new.size)
    return pos - np.maximum.accumulate(np.where(new, pos, 0))
