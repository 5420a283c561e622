"""On-disk cache of scores and verifications (docs/performance.md), keyed by the call's arguments
and the code version (plus the registered key parts, :func:`add_key_part`), so that a
repeated search is instant and a code change never serves stale results. Location: $TOPOFINDER_CACHE, else the platform's user cache directory.

The cache holds data, never code: an entry is a JSON document (numbers, strings, fractions as
"p/q", and only the record classes registered with :func:`record`), with the code version and a
SHA-256 of its content; loading one never executes anything. Directories are created 0700, and
a cache directory another user owns or that is group/world-writable is refused. An entry that
does not parse, does not match its hash or version, or fails the caller's ``check`` (the bounds
of docs/model.md) is recomputed and rewritten.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import stat
import sys
import tempfile
from fractions import Fraction
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable

import numpy as np
from platformdirs import user_cache_dir

from topofinder.errors import TopofinderError

PACKAGE = Path(__file__).resolve().parents[1]
CATALOG = Path(str(files("topofinder.catalog_data")))
#: Sub-folder of the cache directory holding this format's entries (clear() removes it).
ENTRIES = "entries-v2"
#: Largest entry read back (bytes); a bigger file is not an entry this code wrote.
MAX_ENTRY_BYTES = 64 << 20

_RECORDS: dict[str, type] = {}


def record(cls: type) -> type:
    """Class decorator: instances of the frozen dataclass ``cls`` may be cache keys and values
    (stored as their fields; rebuilt by calling ``cls`` with them)."""
    _RECORDS[cls.__qualname__] = cls
    return cls


def _entry_bytes(path: Path) -> bytes:
    """The bytes of the entry file at ``path``: a regular file, not a link (one planted to
    /dev/zero or a FIFO was read without end), at most MAX_ENTRY_BYTES; ValueError else."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = fh.read(MAX_ENTRY_BYTES + 1)
    if len(data) > MAX_ENTRY_BYTES:
        raise ValueError("entry too large")
    return data


def cache_dir() -> Path:
    """$TOPOFINDER_CACHE, else the user cache directory of the platform (XDG on Linux)."""
    return Path(os.environ.get("TOPOFINDER_CACHE") or user_cache_dir("topofinder"))


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the package's source and the catalog data: part of every cache key."""
    h = hashlib.sha256()
    paths = sorted(PACKAGE.rglob("*.py")) + sorted(CATALOG.glob("*.json"))
    for f in paths:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


#: Further parts of every cache key (e.g. the registered families), each a callable giving text.
_KEY_PARTS: list[Callable[[], str]] = []


def add_key_part(part: Callable[[], str]) -> None:
    """Make ``part()`` part of every cache key from now on."""
    _KEY_PARTS.append(part)


def _version() -> str:
    """The code version plus the registered key parts: what every entry is keyed and stamped by."""
    return code_version() + "".join(part() for part in _KEY_PARTS)


def encode(obj: Any) -> Any:
    """``obj`` as plain JSON data: dicts, lists, tuples, fractions, non-finite floats and
    registered records are tagged objects {"t": kind, "v": value}; TypeError otherwise."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else {"t": "float", "v": repr(float(obj))}
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, Fraction):
        return {"t": "fraction", "v": f"{obj.numerator}/{obj.denominator}"}
    if isinstance(obj, (list, tuple)):
        return {"t": type(obj).__name__, "v": [encode(x) for x in obj]}
    if isinstance(obj, dict):
        return {"t": "dict", "v": [[encode(k), encode(v)] for k, v in obj.items()]}
    name = type(obj).__qualname__
    if _RECORDS.get(name) is type(obj):
        return {"t": "record", "name": name,
                "v": {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    raise TypeError(f"cannot cache a {name}")


def decode(data: Any) -> Any:
    """The inverse of :func:`encode`; ValueError for anything it would not have written."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if not isinstance(data, dict) or not isinstance(data.get("t"), str):
        raise ValueError("not a cache value")
    kind, value = data["t"], data.get("v")
    if kind == "float" and value in ("nan", "inf", "-inf"):
        return float(value)
    if kind == "fraction" and isinstance(value, str):
        return Fraction(value)
    if kind in ("list", "tuple") and isinstance(value, list):
        items = [decode(x) for x in value]
        return items if kind == "list" else tuple(items)
    if kind == "dict" and isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 for p in value):
        return {decode(k): decode(v) for k, v in value}
    if kind == "record" and data.get("name") in _RECORDS and isinstance(value, dict):
        cls = _RECORDS[data["name"]]
        if set(value) != {f.name for f in dataclasses.fields(cls)}:
            raise ValueError("record fields differ")
        return cls(**{k: decode(v) for k, v in value.items()})
    raise ValueError(f"unknown cache value kind {kind!r}")


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, allow_nan=False,
                                     separators=(",", ":")).encode()).hexdigest()


def _safe_dir(path: Path, location: Path) -> None:
    """Create ``path`` (and missing parents) with mode 0700; refuse a directory that another
    user owns or that others may write (a planted entry would be served from it)."""
    missing = []
    for p in [path, *path.parents]:
        if p.exists() or p.is_symlink():
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:
            pass
    st = path.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise TopofinderError(f"the cache directory {location} is not a directory; set "
                              f"TOPOFINDER_CACHE to a directory or pass --no-cache")
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        who = "owned by another user" if st.st_uid != os.getuid() else "writable by others"
        raise TopofinderError(f"refusing the cache directory {path}: it is {who}; set "
                              f"TOPOFINDER_CACHE to a private directory or pass --no-cache")


@lru_cache(maxsize=4)
def _checked_location(location: str) -> Path:
    """The entries folder under ``location``, created and vetted, with a probe file written
    once per process; TopofinderError when it is unsafe or not writable."""
    where = Path(location)
    try:
        real = where.resolve()
    except (RuntimeError, OSError):          # a symlink loop (RuntimeError before 3.13)
        raise TopofinderError(f"the cache directory {location} is a symlink loop; set "
                              f"TOPOFINDER_CACHE to a directory or pass --no-cache") from None
    if real == Path(real.anchor):
        raise TopofinderError(f"refusing the cache directory {location}: it is the root "
                              f"directory; set TOPOFINDER_CACHE to a private directory")
    try:
        _safe_dir(where, where)
        _safe_dir(where / ENTRIES, where)
        probe = tempfile.NamedTemporaryFile(dir=where / ENTRIES, prefix=".probe-")
        probe.close()
    except OSError as exc:
        raise TopofinderError(f"the cache directory {location} is not writable "
                              f"({exc.strerror or exc}); set TOPOFINDER_CACHE to a writable "
                              f"directory or pass --no-cache") from None
    return where / ENTRIES


def _entries() -> Path:
    """The entries folder of the current location (it follows $TOPOFINDER_CACHE)."""
    return _checked_location(str(cache_dir()))


class Cached:
    """``fn`` with its results cached on disk under (fn, positional arguments, code version);
    keyword arguments are passed through but are not part of the key (use them for options
    that do not change the result, such as the number of workers). ``check(args, result)``
    raises ValueError for a result that cannot be right (it is then recomputed)."""

    def __init__(self, fn: Callable, check: Callable | None = None):
        self.fn = fn
        self.check = check
        self.name = f"{fn.__module__}.{fn.__qualname__}"
        self.folder = _entries() / self.name

    def _path(self, args: tuple) -> Path:
        key = _digest([self.name, _version(), encode(args)])
        return self.folder / f"{key}.json"

    def _load(self, args: tuple) -> tuple[bool, Any]:
        """(True, result) for a valid entry, else (False, None); never executes its content."""
        path = self._path(args)
        try:
            doc = json.loads(_entry_bytes(path))
            if (doc.get("version") != _version() or doc.get("function") != self.name
                    or doc.get("sha256") != _digest(doc.get("result"))):
                raise ValueError("stale or altered entry")
            result = decode(doc["result"])
            if self.check is not None:
                self.check(args, result)
        except FileNotFoundError:
            return False, None
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            why = "".join(c if c.isprintable() else "?" for c in str(exc))[:200]
            print(f"topofinder: ignoring cache entry {path.name} ({why}); recomputing",
                  file=sys.stderr)
            return False, None
        return True, result

    def _store(self, args: tuple, result: Any) -> None:
        payload = encode(result)
        doc = {"version": _version(), "function": self.name, "sha256": _digest(payload),
               "result": payload}
        _safe_dir(self.folder, self.folder.parent.parent)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".entry-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, allow_nan=False, separators=(",", ":"))
            os.replace(tmp, self._path(args))
        except BaseException:
            os.unlink(tmp)
            raise

    def __call__(self, *args, **options):
        found, result = self._load(args)
        if found:
            return result
        result = self.fn(*args, **options)
        try:
            self._store(args, result)
        except OSError as exc:
            raise TopofinderError(f"cannot write the cache entry in {self.folder} "
                                  f"({exc.strerror or exc}); pass --no-cache") from None
        return result

    def in_cache(self, *args) -> bool:
        """Whether ``self(*args)`` would be answered from the disk cache."""
        return self._path(args).exists()


def cached(fn: Callable, use_cache: bool = True, check: Callable | None = None) -> Callable:
    """``fn`` itself when caching is off, else its disk-cached version (see :class:`Cached`)."""
    return Cached(fn, check) if use_cache else fn


def clear() -> None:
    """Remove every cached entry."""
    shutil.rmtree(_entries())
    _checked_location.cache_clear()
