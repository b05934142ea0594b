"""Chains, groups and chords (docs/architecture.md#workflows): what their ``enqueue`` writes.

- ``chain(a, b, c)``: only ``a`` is pushed; its payload carries the steps after it (each
  with its jid fixed now), and each step's success pushes the next in the script of its
  own ack. Its id is the last step's jid (its result is kept).
- ``group(sigs)``: its state (``group:{gid}``: n, left, ttl) is written first, then the
  members, each carrying the group id and its index.
- ``chord(group, callback)``: the group's state also holds the callback as the script
  splices it (the list of results first among its arguments); the last member's success
  pushes it, once. Its id is the callback's jid (its result is kept); ``chord:{id}``
  names its group, so ``api.cancel(id)`` finds it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from .. import routing
from ..config import Config, get_config
from ..core import workflow
from ..core.payload import dumps, new_jid
from ..errors import ConfigurationError
from ..store import pipes
from . import enqueue as client
from .jobs import Signature


def _signatures(items: Iterable[Any], what: str) -> list[Signature[Any]]:
    found = list(items)
    for item in found:
        if not isinstance(item, Signature):
            raise TypeError(f"{what} takes signatures (job.s(...), job.si(...)), got {item!r}")
    return found


class chain:  # noqa: N801 (named as the API has it: cogworker.chain(...))
    """Steps run one after another, each (unless ``si``) given the previous one's result
    first; the chain stops at a step that ends dead."""

    def __init__(self, *steps: Signature[Any]) -> None:
        self.steps = _signatures(steps, "chain")
        if not self.steps:
            raise TypeError("chain takes at least one signature")
        self.id: str | None = None

    def enqueue(self) -> str:
        """Pushes the first step; returns the chain's id (``cogworker.result(id)``: the last
        step's result)."""
        config = get_config()
        steps = [sig.step(first=i == 0) for i, sig in enumerate(self.steps)]
        last = steps[-1]
        into = routing.one_part(config, [s["queue"] for s in steps], "chain")  # each step pushes the next in its ack
        last_ttl = last.get("ttl") or config.result_ttl
        now = time.time()
        first = workflow.job_payload(steps[0], list(steps[0]["args"]), now)
        wf: dict[str, Any] = first.setdefault("wf", {})
        if len(steps) > 1:
            wf.update(chain=steps[1:], last=last["jid"], lttl=last_ttl)
        else:
            wf["ttl"] = last_ttl
        client.push(first, config=config)
        self.id = last["jid"]
        routing.remember(self.id, into)
        return self.id


class group:  # noqa: N801
    """Members that run in parallel; ``cogworker.result(gid)`` is their results, in order."""

    def __init__(self, members: Iterable[Signature[Any]]) -> None:
        self.members = _signatures(members, "group")
        self.id: str | None = None

    def enqueue(self) -> str:
        """Writes the group's state, then pushes the members; returns the group id."""
        self.id = _enqueue_group(self.members, {}, get_config())
        return self.id


class chord:  # noqa: N801
    """A group, then a callback given the list of its results, pushed exactly once when the
    last member succeeded (never, if one ends dead)."""

    def __init__(self, header: group | Iterable[Signature[Any]], callback: Signature[Any]) -> None:
        self.header = header if isinstance(header, group) else group(header)
        if not isinstance(callback, Signature):
            raise TypeError(f"chord's callback is a signature (job.s(...)), got {callback!r}")
        self.callback = callback
        self.id: str | None = None
        self.group_id: str | None = None

    def enqueue(self) -> str:
        """Returns the chord's id: the callback's jid (``cogworker.result(id)``: its result)."""
        config = get_config()
        step = self.callback.step()
        step.setdefault("ttl", config.result_ttl)
        payload = workflow.job_payload(step, list(step["args"]), time.time())
        head, tail, mode = workflow.callback_template(payload, self.callback.immutable)
        fields = {"cb": head, "cbt": tail, "cbmode": mode, "cbq": step["queue"], "cbj": step["jid"]}
        # The last member's settlement pushes the callback: in the members' part.
        self.group_id = _enqueue_group(self.header.members, fields, config, step["queue"], step["jid"])
        self.header.id = self.group_id
        self.id = step["jid"]
        routing.remember(self.id, routing.holder(config, step["queue"]))
        return self.id


def _enqueue_group(
    members: list[Signature[Any]],
    extra: dict[str, str],
    config: Config,
    callback_queue: str | None = None,
    chord_id: str | None = None,
) -> str:
    steps = [sig.step(first=True) for sig in members]
    queues = [s["queue"] for s in steps] + ([callback_queue] if callback_queue else [])
    config = routing.one_part(config, queues, "chord" if callback_queue else "group")  # its record is counted there
    gid = workflow.GROUP_PREFIX + new_jid()
    now = time.time()
    ttl = max([int(s["ttl"]) for s in steps if s.get("ttl")] or [config.result_ttl])
    state: dict[str | bytes, str | int] = {"n": len(steps), "left": len(steps), "ttl": ttl, "created_at": repr(now)}
    state.update(extra)
    if not steps:
        state.update(done_at=repr(now), expires_at=repr(now + ttl))
        if "cb" in extra:
            raise ConfigurationError("a chord needs at least one member")
    payloads = []
    for i, step in enumerate(steps):
        payload = workflow.job_payload(step, list(step["args"]), now)
        payload.setdefault("wf", {}).update(g=gid, i=i)
        dumps(payload)  # TypeError before anything is written
        payloads.append(payload)
    key = config.keys.group(gid)
    fields = [x for name, value in state.items() for x in (name, value)]
    lives = config.workflow_ttl if steps else 2 * ttl
    # A chord's id names its group as long as the group's state lives (api.cancel(id)).
    pointer = [("SET", config.keys.chord(chord_id), gid, "EX", lives)] if chord_id else []
    # One transaction, so the record never lives without its TTL; pipes.send adds the WAIT
    # of wait_replicas after it (a WAIT inside MULTI would be queued, not waited on).
    replies = pipes.send(
        config.redis(),
        ("MULTI",),
        ("HSET", key, *fields),
        ("EXPIRE", key, lives),
        *pointer,
        ("EXEC",),
    )
    for reply in replies:
        pipes.ok(reply)
    routing.remember(gid, config)
    if payloads:
        client.push_many(payloads)
    return gid
