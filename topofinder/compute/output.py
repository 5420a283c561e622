"""Output files that appear complete or not at all, and never destroy what is at the path.

Every writer of the package goes through :func:`atomic_output`: the content is written to a
temporary file in the target's directory, flushed, given the permissions of the file it
replaces (or 0666 less the umask for a new one) and renamed over the target; on any failure or
interruption the temporary file is removed and the target is untouched. A target that is not
a regular file (a directory, device, FIFO or socket), a read-only file or a file with other
hard links is refused with a one-line :class:`~topofinder.errors.TopofinderError`; a symbolic
link is followed, so the file it points to is replaced and the link stays.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from topofinder.errors import TopofinderError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def checked_target(path: str | os.PathLike) -> tuple[Path, int]:
    """The real path a write to ``path`` replaces and the mode the new file gets; a
    TopofinderError naming the problem when writing there would destroy or fail."""
    text = os.fspath(path)
    if not text:
        raise TopofinderError("empty output file name")
    target = Path(os.path.realpath(text))
    if not target.parent.is_dir():
        raise TopofinderError(f"cannot write {text}: directory {target.parent} does not exist")
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target, 0o666 & ~_umask()
    except OSError as exc:
        raise TopofinderError(f"cannot write {text}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise TopofinderError(f"cannot write {text}: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise TopofinderError(f"refusing to write {text}: it is not a regular file (a device, "
                              f"FIFO or socket); give a file name")
    if st.st_nlink > 1:
        raise TopofinderError(f"refusing to replace {text}: it has {st.st_nlink} hard links and "
                              f"the others would keep the old content; write elsewhere")
    if not st.st_mode & 0o222:
        raise TopofinderError(f"refusing to replace {text}: the file is read-only")
    return target, stat.S_IMODE(st.st_mode)


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8",
                  newline: str | None = None) -> Iterator[IO]:
    """A file object whose content replaces ``path`` when the block ends without error."""
    target, perms = checked_target(path)
    binary = "b" in mode
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, mode, **({} if binary else {"encoding": encoding,
                                                       "newline": newline})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, perms)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise TopofinderError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_text(path: str | os.PathLike | None, text: str) -> None:
    """``text`` to ``path`` atomically, or to standard output when ``path`` is None or "-"."""
    if path is None or os.fspath(path) == "-":
        if sys.stdout is None:
            raise TopofinderError("standard output is closed; give an output file with -o")
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with atomic_output(path) as fh:
        fh.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """``data`` to ``path`` atomically."""
    with atomic_output(path, "wb") as fh:
        fh.write(data)
