"""On-disk cache of scores and verifications (docs/performance.md), keyed by the call's arguments
and the code version (plus the registered key parts, :func:`add_key_part`), so that a repeated search is instant and a code change never serves stale
results. Location: $TOPOFINDER_CACHE, else the platform's user cache directory. joblib.Memory
writes entries atomically and recomputes an entry it cannot read.
"""

from __future__ import annotations

import hashlib
import os
import logging
import tempfile
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Callable

import joblib
from platformdirs import user_cache_dir

from topofinder.errors import TopofinderError

PACKAGE = Path(__file__).resolve().parents[1]
CATALOG = Path(str(files("topofinder.catalog_data")))


class _QuietReload(logging.Filter):
    """An unreadable (corrupt, truncated) entry is recomputed and rewritten by joblib; its
    log record with the loading traceback adds nothing for the user, so it is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Exception while loading results" not in record.getMessage()


logging.getLogger("joblib").addFilter(_QuietReload())


def cache_dir() -> Path:
    """$TOPOFINDER_CACHE, else the user cache directory of the platform (XDG on Linux)."""
    return Path(os.environ.get("TOPOFINDER_CACHE") or user_cache_dir("topofinder"))


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the package's source and the catalog data: part of every cache key."""
    h = hashlib.sha256()
    files = sorted(PACKAGE.rglob("*.py")) + sorted(CATALOG.glob("*.json"))
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


#: Callables whose text joins the code version in every key: state that changes results but is
#: not in the source, such as a family registered at run time (topofinder.families.registry).
_KEY_PARTS: list[Callable[[], str]] = []


def add_key_part(part: Callable[[], str]) -> None:
    """Make ``part()`` part of every cache key from now on."""
    _KEY_PARTS.append(part)


def _version() -> str:
    return code_version() + "".join(part() for part in _KEY_PARTS)


def _call(fn: Callable, version: str, args: tuple, options: dict):
    return fn(*args, **options)


@lru_cache(maxsize=4)
def _memory_at(location: str) -> joblib.Memory:
    return joblib.Memory(location, verbose=0)


def _memory() -> joblib.Memory:
    """The cache at the current location (it follows $TOPOFINDER_CACHE); TopofinderError when
    that location is not a directory this process can write."""
    location = cache_dir()
    _check_writable(str(location))
    return _memory_at(str(location))


@lru_cache(maxsize=4)
def _check_writable(location: str) -> None:
    """Create ``location`` and write a probe file there once per process."""
    try:
        Path(location).mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=location, prefix=".probe-")
        probe.close()
    except OSError as exc:
        raise TopofinderError(f"the cache directory {location} is not writable "
                              f"({exc.strerror or exc}); set TOPOFINDER_CACHE to a writable "
                              f"directory or pass --no-cache") from None


class Cached:
    """``fn`` with its results cached on disk under (fn, positional arguments, code version);
    keyword arguments are passed through but are not part of the key (use them for options
    that do not change the result, such as the number of workers)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self._memorized = _memory().cache(_call, ignore=["options"])

    def __call__(self, *args, **options):
        return self._memorized(self.fn, _version(), args, options)

    def in_cache(self, *args) -> bool:
        """Whether ``self(*args)`` would be answered from the disk cache."""
        return self._memorized.check_call_in_cache(self.fn, _version(), args, {})


def cached(fn: Callable, use_cache: bool = True) -> Callable:
    """``fn`` itself when caching is off, else its disk-cached version."""
    return Cached(fn) if use_cache else fn


def clear() -> None:
    """Remove every cached entry."""
    _memory().clear(warn=False)
