"""The naming rules: one for queue names, one for job names (docs/architecture.md#names).

A name is printable, has no whitespace and no control or format characters, and is at
most a length: ``"\\u200b"`` (a zero-width space) and ``"a\\nb"`` are refused wherever a
name is given (enqueue, the API, the command, the web UI), so that every page and table
can show every queue, and a name can't start a log line of its own. Names already in
Redis that break the rule (written before it, or by another client) are shown escaped
(``shown``), never refused when read.

A leaf: only the errors imported.
"""

from __future__ import annotations

from .errors import ConfigurationError

QUEUE_NAME_MAX = 128
JOB_NAME_MAX = 256  # a module path and a qualified name


def problem(name: object, limit: int) -> str | None:
    """Why ``name`` breaks the rule, or None."""
    if not isinstance(name, str):
        return f"must be a string, got a {type(name).__name__}"
    if not name:
        return "must not be empty"
    if len(name) > limit:
        return f"is {len(name)} characters long, more than {limit}"
    for c in name:
        # isprintable is False for control (Cc), format (Cf: zero-width space, BOM),
        # separator (Z*, but the ASCII space) and unassigned characters.
        if c.isspace() or not c.isprintable():
            return f"has {escaped(c)} in it: printable characters only, no whitespace"
    return None


def check_queue_name(name: object) -> str:
    why = problem(name, QUEUE_NAME_MAX)
    if why is not None:
        raise ConfigurationError(f"queue name {shown(name)} {why}")
    return name  # type: ignore[return-value]  # a str: problem() checked it


def check_job_name(name: object) -> str:
    why = problem(name, JOB_NAME_MAX)
    if why is not None:
        raise ConfigurationError(f"job name {shown(name)} {why}")
    return name  # type: ignore[return-value]


def escaped(text: str) -> str:
    """Every whitespace, control or format character as an escape (``\\n``, ``\\u200b``);
    a backslash doubled, so that the escaped text reads back unambiguously."""
    out = []
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif c.isprintable() and not c.isspace():
            out.append(c)
        else:
            out.append(_escape(c))
    return "".join(out)


def _escape(c: str) -> str:
    code = ord(c)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c)
    if named:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(name: object, limit: int = 80) -> str:
    """A name for a message, a page or a table: as it is when it keeps the rule, else
    escaped and cut to ``limit`` characters (a 100,000-character name shows its start)."""
    if not isinstance(name, str):
        return repr(name)[:limit]
    text = name if problem(name, QUEUE_NAME_MAX) is None else escaped(name[:limit])
    return text if len(text) <= limit else text[: limit - 1] + "…"
