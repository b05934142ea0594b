"""The worker commands' logging (docs/architecture.md#logs): ``--log-level``,
``--log-format text|json`` (or ``COGWORKER_LOG_LEVEL``/``COGWORKER_LOG_FORMAT``), to
stdout, unbuffered, each line one ``write`` so that no line interleaves with another
process's. Set up only if the app module configured no logging of its own.

JSON lines carry ``ts``, ``level``, ``process`` (``master``, ``child N`` or ``worker``),
``pid``, ``event`` (a stable name: ``event_name``), ``message`` (the text); job lines add
``jid``, ``job_class``, ``queue``, ``duration_ms`` and ``outcome`` (given as ``extra=`` by
the code that logs them), and a failure its ``traceback``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from typing import Any

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
JOB_FIELDS = ("jid", "job_class", "queue", "duration_ms", "outcome")
TEXT_FORMAT = "%(asctime)s %(process)d %(levelname)s %(message)s"

process_name = "worker"  # set by the prefork master ("master") and each child ("child N")


def set_process(name: str) -> None:
    global process_name
    process_name = name


def level_arg(text: str) -> str:
    import argparse

    level = text.upper()
    if level not in LEVELS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(LEVELS)}, got {text!r}")
    return level


def format_arg(text: str) -> str:
    import argparse

    if text not in FORMATS:
        raise argparse.ArgumentTypeError(f"must be text or json, got {text!r}")
    return text


def add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--log-level",
        type=level_arg,
        metavar="LEVEL",
        help="DEBUG, INFO, WARNING, ERROR (default: $COGWORKER_LOG_LEVEL, else INFO)",
    )
    parser.add_argument(
        "--log-format",
        type=format_arg,
        metavar="FORMAT",
        help="text or json, one object per line (default: $COGWORKER_LOG_FORMAT, else text)",
    )


def chosen(level: str | None, fmt: str | None, verbose: bool = False) -> tuple[str, str]:
    """The level and format: the flag, else the environment, else INFO and text. A bad
    environment value raises ``ValueError`` (the caller makes it one line)."""
    level = level or ("DEBUG" if verbose else None) or os.environ.get("COGWORKER_LOG_LEVEL") or "INFO"
    fmt = fmt or os.environ.get("COGWORKER_LOG_FORMAT") or "text"
    if level.upper() not in LEVELS:
        raise ValueError(f"COGWORKER_LOG_LEVEL: must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"COGWORKER_LOG_FORMAT: must be text or json, got {fmt!r}")
    return level.upper(), fmt


def user_configured() -> bool:
    """The app set up logging itself (``basicConfig``, ``dictConfig``, a handler on the
    ``cogworker`` logger): then it is left alone."""
    return bool(logging.getLogger().handlers or logging.getLogger("cogworker").handlers)


def setup(level: str, fmt: str) -> bool:
    """Our handler on the root logger, unless the app configured logging; True if set."""
    if user_configured():
        return False
    handler = LineHandler(1)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return True


class LineHandler(logging.Handler):
    """Each record is one ``os.write`` of one whole line to ``fd``: no buffer to flush,
    and no line split by, or interleaved with, another process's (for lines up to the
    pipe's atomic size; a JSON line's traceback stays inside its one line)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode("utf-8", "replace")
            while data:
                written = os.write(self.fd, data)
                data = data[written:]
        except Exception:
            self.handleError(record)


# C0 and C1 controls, and the Unicode line and paragraph separators (some viewers break
# lines there too).
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """Control characters as escapes (``\\n``, ``\\x1b``, ``\\u2028``): a value in a log
    line (a job's name, its error message) never starts a line of its own, and never
    drives the terminal it is read on."""
    return _CONTROLS.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def _indented(text: str) -> str:
    """A traceback under its line: each of its lines escaped and indented, so that only a
    record's own first line starts at the left margin."""
    return "\n".join("  " + escape_controls(line) for line in text.split("\n"))


class TextFormatter(logging.Formatter):
    """The text format: the message on one line (controls escaped), then the failure's
    traceback, if any, indented under it. Its time is UTC, as the JSON format's, whatever
    the process's time zone: ``django.setup()`` sets ``TZ`` to the project's ``TIME_ZONE``
    (America/Chicago unless it says otherwise), and a fleet's lines must line up."""

    def converter(self, seconds: float | None = None) -> time.struct_time:
        return time.gmtime(seconds)

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        trace = getattr(record, "traceback", None)
        tail = ""
        if isinstance(trace, str) and trace and message.endswith("\n" + trace):
            message, tail = message[: -len(trace) - 1], "\n" + _indented(trace)
        record.message = escape_controls(message) + tail
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return _indented(super().formatException(ei))


# A %-format specifier, and a word: what an event name is made of.
_SPEC = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(\.(\*|\d+))?[diouxXeEfFgGcrsa%]")
_WORD = re.compile(r"[a-z][a-z0-9]*")
EVENT_WORDS = 6


def event_name(record: logging.LogRecord) -> str:
    """A name to key on, the same for every line a logging call makes whatever its values:
    the one the call gives (``extra={"event": ...}``: the job lines), else the first words
    of its format string, values left out (``master: child %d (pid %d) left (%s, %s)``:
    ``master_child_pid_left``). Another library's line is its logger's name: libraries
    (redis-py among them) log f-strings, whose words carry the values."""
    given = getattr(record, "event", None)
    if given:
        return str(given)
    if record.name != "cogworker" and not record.name.startswith("cogworker."):
        return record.name
    template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
    words = _WORD.findall(_SPEC.sub(" ", template.split("\n", 1)[0].lower()))
    return "_".join(words[:EVENT_WORDS]) or "log"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "process": process_name,
            "pid": record.process,
            "event": event_name(record),
            "message": message,
        }
        for name in JOB_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        elif getattr(record, "traceback", None):
            line["traceback"] = record.traceback  # type: ignore[attr-defined]
        if "traceback" in line:  # the text format prints it after the line; here it has its own field
            line["message"] = message.split("\n", 1)[0]
        return json.dumps(line, default=str)
