"""Output files that appear complete or not at all, and never destroy what is at the path.

Every writer of the package goes through :func:`atomic_output`: the content is written to a
temporary file in the target's directory, flushed, given the permissions of the file it
replaces (or 0666 less the umask for a new one) and renamed over the target; on any failure or
interruption the temporary file is removed and the target is untouched. A target that is not
a regular file (a directory, device, FIFO or socket), a read-only file or a file with other
hard links is refused with a one-line :class:`~topofinder.errors.TopofinderError`; a symbolic
link the user names is followed, so the file it points to is replaced and the link stays,
while a link where the program chose the name (``follow=False``: files inside a results
folder) is itself replaced, so a link planted there cannot redirect the write. So is a target
that is an input of the same command (same inode, :func:`note_input`), a file the command
already wrote, or the command's own standard output or error. A replaced file keeps its owner
and group and its permissions less setuid/setgid.
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


#: (device, inode) of the files the current command read, and of those it wrote: an output
#: naming one of them is refused (it would destroy an input, or an output written just before).
#: Tracked only inside a command of the command line (:func:`new_command`), not for library
#: calls, which may rewrite their own files.
_INPUTS: set[tuple[int, int]] = set()
_WRITTEN: set[tuple[int, int]] = set()
_COMMAND = {"on": False}


def note_input(path: str | os.PathLike) -> None:
    """Record ``path`` as an input of the current command (readers call this)."""
    if not _COMMAND["on"]:
        return
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return
    _INPUTS.add((st.st_dev, st.st_ino))


@contextmanager
def command() -> Iterator[None]:
    """Track one command's inputs and outputs while the block runs (the command line)."""
    _INPUTS.clear()
    _WRITTEN.clear()
    _COMMAND["on"] = True
    try:
        yield
    finally:
        _COMMAND["on"] = False
        _INPUTS.clear()
        _WRITTEN.clear()


def distinct_outputs(*paths: str | os.PathLike | None) -> None:
    """TopofinderError when two of the output ``paths`` (None and "-" ignored) name one file,
    checked before any is written."""
    seen = {}
    for path in paths:
        if path is None or os.fspath(path) == "-":
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise TopofinderError(f"{os.fspath(path)} is given for two outputs ({seen[real]} "
                                  f"and this one); give each output its own file")
        seen[real] = os.fspath(path)


def _std_streams() -> set[tuple[int, int]]:
    """(device, inode) of standard output and error, when they are files."""
    found = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    return found


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def checked_target(path: str | os.PathLike, follow: bool = True) -> tuple[Path, int]:
    """The real path a write to ``path`` replaces and the mode the new file gets; a
    TopofinderError naming the problem when writing there would destroy or fail.
    ``follow``: a symbolic link at ``path`` is followed (else the link itself is replaced)."""
    text = os.fspath(path)
    if not text:
        raise TopofinderError("empty output file name")
    if follow:
        target = Path(os.path.realpath(text))
    else:
        target = Path(os.path.realpath(os.path.dirname(os.path.abspath(text)))) / \
            os.path.basename(text)
        if os.path.islink(target):
            return target, 0o666 & ~_umask()
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
    key = (st.st_dev, st.st_ino)
    if key in _INPUTS:
        raise TopofinderError(f"refusing to write {text}: it is an input of this command; "
                              f"write the output elsewhere")
    if key in _WRITTEN:
        raise TopofinderError(f"refusing to write {text}: this command already wrote it as "
                              f"another output; give each output its own file")
    if key in _std_streams():
        raise TopofinderError(f"refusing to replace {text}: it is this command's standard "
                              f"output or error; omit -o to print to standard output")
    if st.st_nlink > 1:
        raise TopofinderError(f"refusing to replace {text}: it has {st.st_nlink} hard links and "
                              f"the others would keep the old content; write elsewhere")
    if not st.st_mode & 0o222:
        raise TopofinderError(f"refusing to replace {text}: the file is read-only")
    return target, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8",
                  newline: str | None = None, follow: bool = True) -> Iterator[IO]:
    """A file object whose content replaces ``path`` when the block ends without error
    (``follow``: :func:`checked_target`)."""
    target, perms = checked_target(path, follow)
    binary = "b" in mode
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, mode, **({} if binary else {"encoding": encoding,
                                                       "newline": newline})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _keep_owner(tmp, target)
        os.chmod(tmp, perms)
        os.replace(tmp, target)
        tmp = None
        if _COMMAND["on"]:
            st = os.stat(target)
            _WRITTEN.add((st.st_dev, st.st_ino))
    except OSError as exc:
        raise TopofinderError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _keep_owner(tmp: str, target: Path) -> None:
    """Give the new file at ``tmp`` the owner and group of the file it replaces; refuse when
    that is not allowed (the replacement would change who owns the file)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):                 # a link being replaced: the new file is ours
        return
    mine = os.stat(tmp)
    if (mine.st_uid, mine.st_gid) == (st.st_uid, st.st_gid):
        return
    try:
        os.chown(tmp, st.st_uid, st.st_gid)
    except PermissionError:
        raise TopofinderError(f"refusing to replace {target}: it belongs to another user or "
                              f"group, and the new file could not keep that owner") from None


def write_stdout(text: str) -> None:
    """``text`` to standard output, all of it: a short write (a full disk under unbuffered
    output) or a character the output's encoding lacks is a one-line error, never a cut."""
    if sys.stdout is None:
        raise TopofinderError("standard output is closed; give an output file with -o")
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):      # not a real file (a test's capture)
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        data = memoryview(text.encode(encoding))
    except UnicodeEncodeError as exc:
        raise TopofinderError(f"standard output ({encoding}) cannot show "
                              f"{ascii(exc.object[exc.start:exc.end])}; write with -o FILE "
                              f"or set PYTHONIOENCODING=utf-8") from None
    sys.stdout.flush()
    while data:
        written = os.write(fd, data)
        if written <= 0:
            raise TopofinderError("standard output accepted no more data")
        data = data[written:]


def write_text(path: str | os.PathLike | None, text: str, follow: bool = True) -> None:
    """``text`` to ``path`` atomically, or to standard output when ``path`` is None or "-"
    (``follow``: :func:`checked_target`)."""
    write_blocks(path, (text,), follow)


def write_blocks(path: str | os.PathLike | None, blocks, follow: bool = True) -> None:
    """The concatenation of the strings ``blocks`` yields, written as each comes (a large
    document is never held whole): to ``path`` atomically, or to standard output when
    ``path`` is None or "-" (``follow``: :func:`checked_target`)."""
    if path is None or os.fspath(path) == "-":
        for block in blocks:
            write_stdout(block)
        return
    with atomic_output(path, follow=follow) as fh:
        for block in blocks:
            fh.write(block)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """``data`` to ``path`` atomically."""
    with atomic_output(path, "wb") as fh:
        fh.write(data)
