"""The fast fetch's commands and replies (docs/architecture.md#fast-fetch): after a large
job, the ack is a plain LREM, the next job moves with a plain LMOVE, and fetch_moved.lua
only checks, all in one MULTI, so no payload enters Lua. ``Fetcher`` decides when to
send it and what the reply means."""

from __future__ import annotations

from typing import Any

from ... import store
from ...store import wire
from ...transitions.call import Call, as_command
from .work import MARK, Fast


def commands(sha: str, call: Call, in_progress: bytes, guess_key: bytes, ack: bytes | None) -> list[tuple[Any, ...]]:
    """The MULTI: a plain LREM of ``ack``, the mark, a plain LMOVE from ``guess_key`` (the
    queue the last job came from), then fetch_moved.lua (``call``, sent under ``sha``)."""
    sent: list[tuple[Any, ...]] = [("MULTI",)]
    if ack is not None:
        sent.append(("LREM", in_progress, -1, ack))  # the ack is near the tail
    sent += [
        ("LPUSH", in_progress, MARK),
        ("LMOVE", guess_key, in_progress, "RIGHT", "LEFT"),
        as_command(sha, call),
        ("EXEC",),
    ]
    return sent


def replies(conn: Any, fast: Fast) -> list[Any]:
    """A fast fetch's replies: MULTI's, one per queued command, then EXEC's. A command
    refused as it was queued (OOM, READONLY) made EXEC discard everything: raised."""
    got = wire.replies(conn, fast.queued + 2)
    refused = next((r for r in got[:-1] if isinstance(r, store.ResponseError)), None)
    if isinstance(got[-1], store.ResponseError):
        raise refused or got[-1]
    return list(got[-1])
