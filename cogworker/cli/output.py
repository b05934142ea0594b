"""What the ``cogworker`` command prints: aligned tables that fit 100 columns for a person,
one JSON document for a script, and the one-line errors with their exit codes."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..config import number

WIDTH = 100  # a person's terminal: every table is cut to fit

# Exit codes (the command's contract).
OK = 0
NOT_FOUND = 1
USAGE = 2
UNREACHABLE = 3


class CliError(Exception):
    """One line on stderr and an exit code; never a traceback."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def not_found(message: str) -> CliError:
    return CliError(message, NOT_FOUND)


def usage(message: str) -> CliError:
    return CliError(message, USAGE)


def one_line(text: object) -> str:
    """A message as one line, whatever it carries (a job's error message may span many)."""
    return " ".join(str(text).split())


def one_line_cut(text: object, limit: int) -> str:
    """``one_line(text)`` cut to ``limit`` + 1 characters (enough for ``cut`` to see it is
    longer), reading only as much of the text as that takes: a job's error message can be
    20 MB, and a cell or a line never shows more than the terminal's width of it."""
    raw = str(text)
    size = 4 * limit + 64
    while True:
        # A prefix's line is a prefix of the whole text's line (the last word at worst cut).
        line = one_line(raw[:size])
        if len(line) > limit or size >= len(raw):
            return line[: limit + 1]
        size *= 4  # mostly whitespace so far: read more, still linear in all


# -- JSON ------------------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """The API's records (dataclasses or plain objects) as JSON values. Bytes that are not
    UTF-8 (a corrupted entry) are shown with replacement characters, never dropped."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "_asdict"):
        return jsonable(value._asdict())
    if hasattr(value, "__dict__"):
        return {k: jsonable(v) for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(jsonable(document), indent=2, sort_keys=False) + "\n")


# -- tables ------------------------------------------------------------------------------------


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def table(
    headers: Sequence[str], rows: Iterable[Sequence[object]], width: int = WIDTH, keep: Sequence[int] = (0,)
) -> str:
    """Columns aligned, two spaces apart; the widest columns are cut (with …) until the
    whole line fits ``width``, except the ``keep`` ones (a jid or an identity is what a
    person copies into the next command). Numbers are right-aligned.

    No cell is read past ``width``: a column is then at most ``width`` wide, so the
    cutting below takes at most ``width`` passes per column, whatever the cells hold."""
    cells = [[one_line_cut(c, width) for c in row] for row in rows]
    numeric = [
        all(_is_number(row[i]) or row[i] == "-" for row in cells) and any(_is_number(row[i]) for row in cells)
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    _fit(widths, width, [i for i in range(len(widths)) if i not in keep])
    _fit(widths, width, list(keep))  # a kept column too, if it alone is wider than the terminal
    lines = []
    for row in [list(headers), *cells]:
        parts = []
        for i, cell in enumerate(row):
            text = cut(cell, widths[i])
            parts.append(text.rjust(widths[i]) if numeric[i] and row is not headers else text.ljust(widths[i]))
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _fit(widths: list[int], width: int, cuttable: list[int]) -> None:
    """Narrows the widest of the ``cuttable`` columns, one character at a time, until the
    line fits ``width`` or each is down to 6."""
    cuttable = [i for i in cuttable if i < len(widths)]
    while cuttable and sum(widths) + 2 * (len(widths) - 1) > width:
        widest = max(cuttable, key=lambda i: widths[i])
        if widths[widest] <= 6:
            break
        widths[widest] -= 1


def _is_number(text: str) -> bool:
    try:
        float(text.removesuffix("s").removesuffix("MB"))
        return True
    except ValueError:
        return False


def pairs(items: Sequence[tuple[str, object]]) -> str:
    """``label  value`` lines, labels aligned."""
    width = max((len(k) for k, _ in items), default=0)
    return "\n".join(f"{k.ljust(width)}  {cut(one_line_cut(v, WIDTH), WIDTH - width - 2)}" for k, v in items)


# -- values --------------------------------------------------------------------------------------


def when(epoch: object) -> str:
    """An epoch time as UTC, to the second; '-' when there is none."""
    if epoch is None or epoch == "":
        return "-"
    if isinstance(epoch, datetime.datetime):
        return epoch.strftime("%Y-%m-%d %H:%M:%S")
    try:
        moment = datetime.datetime.fromtimestamp(float(epoch), datetime.UTC)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return str(epoch)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def relative(epoch: object, now: float | None = None) -> str:
    """An epoch time relative to now, short enough for a table: ``3m05s ago``, ``in 59m``."""
    at = number(epoch)
    if at is None:
        return "-"
    delta = at - (time.time() if now is None else now)
    return f"in {seconds(delta)}" if delta > 0 else f"{seconds(-delta)} ago"


def seconds(value: object) -> str:
    """A duration for a person: 0.4s, 12s, 5m03s, 2h10m, 3d04h."""
    total = number(value)
    if total is None:
        return "-"
    if total < 10:
        return f"{total:.1f}s"
    whole = int(total)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def megabytes(value: object) -> str:
    """RSS in bytes -> MB; '-' when unknown (not measured: 0)."""
    size = number(value)
    if size is None:
        return "-"
    return f"{size / 1048576:.0f}MB" if size > 0 else "-"


def field(record: object, name: str, default: Any = None) -> Any:
    """A record's attribute or key (the API's records, or a dict from a JSON blob)."""
    if isinstance(record, dict):
        return record.get(name, default)
    return getattr(record, name, default)
