"""A kept result as the operator sees it (docs/architecture.md#workflows): a job's of
``results=True``, a chain's or chord's (by its id), or a group's, read without waiting."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .. import routing
from ..boundedjson import loads as json_loads
from ..config import Config, as_text, count, get_config, number
from ..core.workflow import GROUP_PREFIX


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


def _value(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json_loads(text)
    except ValueError:
        return text  # not JSON (written by something else): shown as it is


def result(ident: str, config: Config | None = None, now: float | None = None) -> Result | None:
    """The result of ``ident`` (a jid or a group id) as it is now; None if none is kept
    (in the queue layout: the first part that keeps one)."""
    config = config or get_config()
    group = ident.startswith(GROUP_PREFIX)
    raw = routing.first(
        routing.parts(config),
        lambda part: part.redis().hgetall(part.keys.group(ident) if group else part.keys.result(ident)) or None,
    )
    if not raw:
        return None
    return _parsed(ident, group, raw, time.time() if now is None else now)


def _parsed(ident: str, group: bool, raw: dict[Any, Any], now: float) -> Result:
    f = {as_text(k): as_text(v) for k, v in raw.items()}
    prefix = "f:" if group else ""
    expires_at = number(f.get("expires_at"))
    common: dict[str, Any] = {"expires_at": expires_at}
    if group:
        common.update(
            total=count(f.get("n"), None), left=count(f.get("left"), None), finished_at=number(f.get("done_at"))
        )
    else:
        common["finished_at"] = number(f.get("finished_at"))
    if "failed" in f or f.get("status") == "dead":
        return Result(
            ident,
            "dead",
            None,
            f.get(prefix + "error_class"),
            f.get(prefix + "error_message"),
            f.get(prefix + "traceback") or None,
            f.get(prefix + "jid"),
            **common,
        )
    if group and f.get("left") != "0":
        return Result(ident, "running", **common)
    if expires_at is not None and now > expires_at:
        return Result(ident, "expired", **common)
    if group:
        n = count(f.get("n"))
        return Result(ident, "succeeded", [_value(f.get(f"r:{i}")) for i in range(n)], **common)
    return Result(ident, "succeeded", _value(f.get("value")), **common)
