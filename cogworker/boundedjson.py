"""JSON within one nesting limit, shared by the side that writes a payload and every side
that reads one (docs/architecture.md#payload).

Python's decoder recurses once per level and raises ``RecursionError`` (not a
``ValueError``) when the interpreter's stack runs out: where that happens depends on how
deep the caller already is, so a payload the enqueuing process could encode (about 995
levels) could not be read by a worker (about 985). ``MAX_DEPTH`` is far below both, in
every process: enqueue refuses more, and a reader takes more for what it is, bad input.

A leaf: nothing of cogworker imported.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

# Levels of arrays and objects in a whole payload (the job object and its args list are
# two of them). As Ruby's JSON.parse's max_nesting: far more than arguments need.
MAX_DEPTH = 100

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STRING_B = re.compile(_STRING.pattern.encode(), re.S)
_NOT_BRACKET_B = re.compile(_NOT_BRACKET.pattern.encode())
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1, ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class TooDeep(ValueError):
    """JSON nested deeper than ``MAX_DEPTH``."""


def depth(data: str | bytes) -> int:
    """How deep the arrays and objects of JSON ``data`` nest (brackets inside strings
    don't count). Linear, never recursive: it measures text no decoder could take."""
    if isinstance(data, str):
        brackets: str | bytes = _NOT_BRACKET.sub("", _STRING.sub("", data))
    else:
        brackets = _NOT_BRACKET_B.sub(b"", _STRING_B.sub(b"", data))
    return max(accumulate(_STEP[c] for c in brackets), default=0)


def check_depth(data: str | bytes) -> None:
    """``TooDeep`` if ``data`` nests deeper than ``MAX_DEPTH``. Data with fewer brackets
    than the limit (nearly every payload) is not scanned."""
    if isinstance(data, str):
        many = data.count("[") + data.count("{") > MAX_DEPTH
    else:
        many = data.count(b"[") + data.count(b"{") > MAX_DEPTH
    if many and depth(data) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels")


def loads(raw: bytes | str) -> Any:
    """``json.loads(raw)``, but ``ValueError`` (a ``UnicodeDecodeError``, a
    ``JSONDecodeError`` or ``TooDeep``) for anything that is not JSON within the limit,
    never another exception."""
    if not isinstance(raw, (str, bytes)):
        raise ValueError(f"not JSON text: a {type(raw).__name__}")
    check_depth(raw)
    try:
        return json.loads(raw)
    except RecursionError:  # a caller already near the stack's end
        raise TooDeep("nested too deep for this process's stack") from None


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def shallow(raw: bytes | str) -> dict[str, Any] | None:
    """The top level of a JSON object, each nested array or object read as null; None if
    ``raw`` is not one. For the names (a jid) in an entry too deep to decode whole:
    linear, never recursive."""
    try:
        text = raw.decode("utf-8", "surrogatepass") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        return None
    parts, level, start, kept = [], 0, 0, 0
    for token in _TOKEN.finditer(text):
        mark = token.group()
        if mark in "[{":
            level += 1
            if level == 2:
                start = token.start()
        elif mark in "]}":
            level -= 1
            if level == 1:
                parts += [text[kept:start], "null"]
                kept = token.end()
    try:
        value = json.loads("".join(parts) + text[kept:])
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
