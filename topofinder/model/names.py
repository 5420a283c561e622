"""Names at the boundary (docs/formats.md "Names"): one validation and one quoting policy for
the node and host names that come in with topology files, plans and mappings and go out into
host files, shell lines and spreadsheets.

- In: a name is printable text. Control characters (NUL, C0/C1, line and paragraph
  separators), format characters (bidi marks and overrides, zero-width joiners, the BOM),
  surrogates and unassigned code points (U+FFFE, which XML cannot carry) are refused with one line naming the file and line; a leading BOM of a file is
  dropped before parsing.
- Out to host files, rank files and shells: a host name must match :data:`HOST_NAME` (letters,
  digits, ``.``, ``_``, ``-``, ``:``; not starting with ``-``), so it is one shell word that
  needs no quoting; shell lines still pass every word through :func:`shlex.quote`.
- Out to CSV: a text cell starting with ``=``, ``+``, ``-``, ``@``, tab, CR or ``'`` is written
  with a leading ``'`` (spreadsheets then show it as text, not a formula); topofinder's CSV
  readers drop that one ``'``, so names survive a write and read unchanged.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from typing import Iterator

from topofinder.errors import TopofinderError

#: Host names written into host files, rank files and shell lines.
HOST_NAME = re.compile(r"[A-Za-z0-9_.:][A-Za-z0-9_.:-]*")
#: Longest node name accepted (a DNS name is at most 253 characters).
MAX_NAME = 1024
_REFUSED = {"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"}
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "'")


def bad_character(text: str, allowed: str = "") -> int | None:
    """Index of the first control, format (bidi, zero-width) or surrogate character of
    ``text`` that is not in ``allowed``, or None. Each distinct character is classified once,
    so a file of hundreds of MB takes a fraction of a second."""
    bad = [ch for ch in set(text) if unicodedata.category(ch) in _REFUSED and ch not in allowed]
    return min(text.index(ch) for ch in bad) if bad else None


def check_text(text: str, where: str) -> str:
    """``text`` (a whole input file, BOM dropped) after refusing any control or format
    character except tab and line ends, with one line naming ``where`` and the line number."""
    text = text.removeprefix("\ufeff")
    i = bad_character(text.replace("\r\n", "\n"), "\t\n")
    if i is not None:
        text = text.replace("\r\n", "\n")
        start = text.rfind("\n", 0, i) + 1
        raise TopofinderError(f"{where}:{text.count(chr(10), 0, i) + 1}: control or format "
                              f"character U+{ord(text[i]):04X} at column {i - start + 1}; names "
                              f"and fields must be printable text")
    return text


def check_name(name: str, where: str) -> str:
    """``name`` if it is a usable node name (non-empty, printable, at most MAX_NAME long)."""
    i = bad_character(name)
    if i is not None:
        raise TopofinderError(f"{where}: node name {ascii(name)} has the control or format "
                              f"character U+{ord(name[i]):04X}; names must be printable text")
    if not name.strip() or len(name) > MAX_NAME:
        raise TopofinderError(f"{where}: node name {ascii(name[:40])} is empty or longer than "
                              f"{MAX_NAME} characters")
    return name


def host_name(name: str) -> str:
    """``name`` if it may go into a host file, rank file or shell line (:data:`HOST_NAME`)."""
    if not HOST_NAME.fullmatch(name):
        raise TopofinderError(f"host name {ascii(name)} is not a plain host name (letters, "
                              f"digits, '.', '_', '-', ':'; not starting with '-'); rename the "
                              f"node or use --format csv")
    return name


def csv_cell(value):
    """``value`` safe for a spreadsheet: a text cell that a spreadsheet would read as a formula
    gets a leading ``'`` (module doc); numbers are unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


class CsvWriter:
    """csv.writer with every cell passed through :func:`csv_cell`."""

    def __init__(self, out):
        self._writer = csv.writer(out, lineterminator="\n")

    def writerow(self, row) -> None:
        self._writer.writerow([csv_cell(x) for x in row])

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def csv_rows(text: str, where: str) -> Iterator[list[str]]:
    """Rows of CSV ``text`` (BOM dropped, control characters refused by line) with the ``'``
    that :func:`csv_cell` adds removed; a row csv cannot read is a one-line error."""
    reader = csv.reader(io.StringIO(check_text(text, where)))
    try:
        for row in reader:
            yield [x[1:] if x.startswith("'") else x for x in row]
    except csv.Error as exc:              # a field over csv's size limit (128 KiB)
        raise TopofinderError(f"{where}:{reader.line_num}: not valid CSV ({exc})") from None

