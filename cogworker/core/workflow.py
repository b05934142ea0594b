"""Workflows as a job's payload carries them (docs/architecture.md#workflows): its ``wf``
object says what its success settles besides its ack, all in the one script of that ack
(``complete.lua``):

- ``ttl``: its return value is kept that many seconds (``@job(results=True)``);
- ``chain``: the steps after it (serialised signatures, each with its jid fixed at the
  chain's enqueue), ``last``: the jid of the chain's last step (the chain's id) and
  ``lttl`` its result TTL;
- ``g``, ``i``: the group (or chord) it belongs to, and its index there;
- ``b``: the batch it belongs to (counted there; docs/architecture.md#batches).

Pure: builds what the script is handed. A step is a plain JSON object: ``class``, ``args``,
``kwargs``, ``queue``, ``retry``, ``jid``, optional ``timeout``, ``imm`` (it takes no
previous result) and ``ttl`` (its result kept).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from .payload import dumps

SENTINEL = "\x00cogworker-results\x00"  # where a chord's callback takes the list of results
_SENTINEL_JSON = '"\\u0000cogworker-results\\u0000"'
GROUP_PREFIX = "g-"  # a group id: result() tells it from a jid by this
MAX_RESULT_BYTES = 4 * 1024 * 1024


class Completion(NamedTuple):
    """What ``complete.lua`` writes beside the ack (an ``fate.Complete`` carries it)."""

    jid: str
    value: str  # the return value, JSON
    ttl: str  # seconds its result is kept, or "" (not kept)
    group: str = ""
    member: int = 0  # its index in the group
    next_payload: str = ""  # a chain's next step, ready to push
    next_queue: str = ""
    batch: str = ""  # its batch's id (``wf.b``): counted there as succeeded
    chain: str = ""  # its chain's id (``wf.last``): its cancel mark stops the next step


def encode_result(value: Any) -> str:
    """The return value as JSON (the payload's encoder and nesting limit); TypeError with
    why when it can't be kept."""
    try:
        text = dumps(value)
    except TypeError as exc:
        raise TypeError(f"its return value can't be kept as a result: {exc}".replace("job arguments", "it")) from None
    if len(text) > MAX_RESULT_BYTES:
        raise TypeError(
            f"its return value can't be kept as a result: {len(text)} bytes of JSON, more than {MAX_RESULT_BYTES}"
        )
    return text


def completion(payload: dict[str, Any], value: Any, default_ttl: float, now: float | None = None) -> Completion:
    """What the success of a workflow job writes; TypeError if its value can't be kept."""
    wf = payload["wf"]
    ttl = wf.get("ttl")
    # A job only counted by its batch keeps no value: one that can't be JSON is no failure.
    encoded = encode_result(value) if ttl is not None or wf.get("g") or wf.get("chain") else "null"
    kept = (
        str(int(ttl if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else default_ttl))
        if ttl is not None
        else ""
    )
    group = wf.get("g") if isinstance(wf.get("g"), str) else ""
    member = int(wf.get("i") or 0)
    batch = wf.get("b") if isinstance(wf.get("b"), str) else ""
    chain = wf.get("chain")
    if isinstance(chain, list) and chain:
        step = next_step(chain[0], value, chain[1:], wf.get("last"), wf.get("lttl"), now)
        chain_id = wf.get("last") if isinstance(wf.get("last"), str) else ""
        return Completion(payload["jid"], encoded, kept, group, member, dumps(step), step["queue"], batch, chain_id)
    return Completion(payload["jid"], encoded, kept, group, member, batch=batch)


def next_step(
    step: dict[str, Any], value: Any, rest: list[Any], last: Any, last_ttl: Any, now: float | None = None
) -> dict[str, Any]:
    """A chain's next step as a payload: the previous result first among its arguments
    (unless it is immutable), the rest of the chain in its ``wf``."""
    now = time.time() if now is None else now
    args = list(step.get("args") or [])
    if not step.get("imm"):
        args.insert(0, value)
    payload = job_payload(step, args, now)
    wf: dict[str, Any] = payload.setdefault("wf", {})
    if rest:
        wf.update(chain=rest, last=last, lttl=last_ttl)
    elif last_ttl is not None:
        wf["ttl"] = last_ttl  # the chain's last step: its result is the chain's
    if not wf:
        del payload["wf"]
    return payload


def job_payload(step: dict[str, Any], args: list[Any], now: float) -> dict[str, Any]:
    """A step's payload as ``build_payload`` makes one, its jid the step's."""
    payload: dict[str, Any] = {
        "class": step["class"],
        "args": args,
        "kwargs": dict(step.get("kwargs") or {}),
        "jid": step["jid"],
        "queue": step.get("queue") or "default",
        "retry": step.get("retry", 25),
        "created_at": now,
        "enqueued_at": now,
    }
    if step.get("timeout") is not None:
        payload["timeout"] = step["timeout"]
    if step.get("ttl") is not None:
        payload["wf"] = {"ttl": step["ttl"]}
    return payload


def callback_template(payload: dict[str, Any], immutable: bool) -> tuple[str, str, str]:
    """A chord's callback as the script splices it: (head, tail, mode). Mode ``list``: the
    list of results goes first among its arguments, between head and tail; ``fixed``:
    the payload is pushed as it is (an immutable callback)."""
    if immutable:
        return dumps(payload), "", "fixed"
    spliced = dict(payload, args=[SENTINEL, *payload.get("args", [])])
    text = dumps(spliced)
    parts = text.split(_SENTINEL_JSON)
    if len(parts) != 2:  # the sentinel among the arguments themselves: refused, not guessed
        raise TypeError("a chord callback's arguments can't contain cogworker's results marker")
    return parts[0], parts[1], "list"
