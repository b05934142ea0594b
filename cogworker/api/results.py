"""A kept result as the operator sees it (docs/architecture.md#workflows): a job's of
``results=True``, a chain's or chord's (by its id), or a group's, read without waiting."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..boundedjson import loads as json_loads
from ..config import Config, as_text, get_config
from ..core.workflow import GROUP_PREFIX
from . import shards


@dataclass(frozen=True)
class Result:
    """``state``: succeeded, dead, expired (kept, past its TTL) or running (a group with
    members left). ``value``: the result (a group's: the list, in order). For dead: the
    job that died (``failed_jid``) and its error."""

    id: str
    state: str
    value: Any = None
    error_class: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    failed_jid: str | None = None
    finished_at: float | None = None
    expires_at: float | None = None
    total: int | None = None  # a group's members
    left: int | None = None  # a group's members not succeeded yet


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _value(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json_loads(text)
    except ValueError:
        return text  # not JSON (written by something else): shown as it is


def result(ident: str, config: Config | None = None, now: float | None = None) -> Result | None:
    """The result of ``ident`` (a jid or a group id) as it is now; None if none is kept
    (in the queue layout: the first shard that keeps one)."""
    config = config or get_config()
    group = ident.startswith(GROUP_PREFIX)
    raw = shards.first(shards.parts(config), lambda part: part.redis().hgetall(
        part.keys.group(ident) if group else part.keys.result(ident)) or None)
    if not raw:
        return None
    return _parsed(ident, group, raw, time.time() if now is None else now)


def _parsed(ident: str, group: bool, raw: dict[Any, Any], now: float) -> Result:
    f = {as_text(k): as_text(v) for k, v in raw.items()}
    prefix = "f:" if group else ""
    expires_at = _float(f.get("expires_at"))
    common: dict[str, Any] = {"expires_at": expires_at}
    if group:
        common.update(total=_int(f.get("n")), left=_int(f.get("left")), finished_at=_float(f.get("done_at")))
    else:
        common["finished_at"] = _float(f.get("finished_at"))
    if "failed" in f or f.get("status") == "dead":
        return Result(ident, "dead", None, f.get(prefix + "error_class"), f.get(prefix + "error_message"),
                      f.get(prefix + "traceback") or None, f.get(prefix + "jid"), **common)
    if group and f.get("left") != "0":
        return Result(ident, "running", **common)
    if expires_at is not None and now > expires_at:
        return Result(ident, "expired", **common)
    if group:
        n = _int(f.get("n")) or 0
        return Result(ident, "succeeded", [_value(f.get(f"r:{i}")) for i in range(n)], **common)
    return Result(ident, "succeeded", _value(f.get("value")), **common)
