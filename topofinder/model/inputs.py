"""Input documents at the boundary (docs/formats.md "Inputs"): every file another person or
tool wrote (topologies, schedules, plans, diffs, mappings, sweep specs, workloads) is read by
:func:`read_input` and JSON ones parsed by :func:`read_json`, so one set of limits holds:

- the path is a regular file or a pipe (a directory, device or socket is refused: reading
  ``/dev/zero`` would never end), of at most a given size, read no further than that;
- the text is UTF-8 (a leading BOM dropped; CR LF and CR line ends read as LF) without control
  or format characters
  (:func:`~topofinder.model.names.check_text`, which names the line);
- JSON: a key repeated in one object (other tools' readers resolve it differently), an
  integer of more than :data:`MAX_DIGITS` digits, or nesting too deep to read is refused.

Every refusal is one TopofinderError line naming the file, never quoting its content.
"""

from __future__ import annotations

import json
import os
import stat

from topofinder.compute.output import note_input
from topofinder.errors import TopofinderError
from topofinder.model.names import check_text

#: Largest input document read (bytes) unless the reader states its own limit: a schedule of
#: N = 10^6 nodes written by topofinder is smaller.
MAX_INPUT_BYTES = 512 << 20
#: Most digits of an integer in an input JSON document (2^64 has 20).
MAX_DIGITS = 40


def read_input(path: str | os.PathLike, what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The text of the input file ``path`` (described as ``what`` in errors), checked as the
    module doc says; at most ``limit`` bytes."""
    name = os.fspath(path)
    note_input(name)
    try:
        with open(name, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
                raise TopofinderError(f"cannot read {what} {name}: it is {kind}")
            data = fh.read(limit + 1)
    except IsADirectoryError:
        raise TopofinderError(f"cannot read {what} {name}: it is a directory") from None
    except OSError as exc:
        raise TopofinderError(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise TopofinderError(f"{what} {name} is larger than {limit >> 20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TopofinderError(f"{name}:{line}: not UTF-8 text (byte {exc.start}); the {what} "
                              f"must be UTF-8") from None
    return check_text(text.replace("\r\n", "\n").replace("\r", "\n"), name)


def read_json(text: str | bytes, where: str):
    """The value of the JSON document ``text`` read from ``where``; TopofinderError (one line,
    with the line number) when it does not parse, repeats a key in an object, holds an integer
    longer than :data:`MAX_DIGITS` digits or nests too deeply to read."""
    def big(token: str) -> int:
        if len(token.lstrip("-")) > MAX_DIGITS:
            raise ValueError(f"an integer of {len(token)} digits (at most {MAX_DIGITS})")
        return int(token)

    def unique(pairs: list) -> dict:
        doc = dict(pairs)
        if len(doc) != len(pairs):
            seen = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise ValueError(f"key {ascii(key)[:60]} appears twice in one object")
        return doc

    try:
        return json.loads(text, parse_int=big, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise TopofinderError(f"{where}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise TopofinderError(f"{where}: JSON nested too deeply to read") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TopofinderError(f"{where}: not a usable JSON document ({exc})") from None
