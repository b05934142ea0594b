"""The plain fetch sends its keys and arguments encoded ahead, once per worker
(docs/architecture.md#fetch): what goes on the wire is what the typed function builds from
them as text, encoded by the client, whichever queues (and priority levels) a fetch names
and whatever the last job was. Only the bytes of the call differ from redis-py's per-call
encoding in who made them."""

from __future__ import annotations

import json
from typing import Any

from apps import core_jobs

from cogworker.core.inprogress import jid_of
from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.keys import level_name
from cogworker.transitions import fetch as scripts
from cogworker.transitions.call import Call


def _as_text(fetcher: Fetcher, order: list[str], since: str, ack: bytes | None, block: str) -> Call:
    """fetch.lua's call as the worker would build it from its keys as text."""
    keys = fetcher.keys
    return scripts.fetch(
        in_progress=fetcher.in_progress,
        orphans=keys.orphanings(jid_of(ack) if ack else "-"),
        fence=fetcher.fence_key,
        last_beat=keys.last_beat,
        wake=keys.wake,
        paused=keys.paused,
        ahead=keys.ahead,
        queues=[keys.queue(q) for q in order],
        ack=ack or b"",
        block=block,
        owner="",
        number="",
        identity=fetcher.beat_as,
        queue_prefix=keys.queue_prefix,
        since=since,
    )


def test_the_plain_fetch_sends_what_its_keys_as_text_encode_to(config: Any, monkeypatch: Any) -> None:
    for n in range(3):
        core_jobs.record.options(queue="a").enqueue(n)
        core_jobs.record.options(queue="b").enqueue(n)
    core_jobs.record.options(queue="b", priority=5).enqueue("level")
    fetcher = Fetcher(config, "host:1:aa", [("a", None), ("b", None)], block_timeout=0.0)
    planned: list[tuple[list[str], str, bool]] = []  # each fetch's order, its since, whether it was cut
    plan = fetcher.plan
    monkeypatch.setattr(fetcher, "plan", lambda whole=False: planned.append(plan(whole)) or planned[-1])
    sent: list[Call] = []
    fetched = scripts.fetched
    monkeypatch.setattr(scripts, "fetched", lambda client, call: sent.append(call) or fetched(client, call))

    acks: list[bytes | None] = [None]
    got = []
    while (work := fetcher.fetch(ack=acks[-1])) is not None:
        got.append(json.loads(work.raw)["args"][0])
        acks.append(work.raw)
    assert sorted(got, key=str) == [0, 0, 1, 1, 2, 2, "level"]

    encode = config.redis().get_encoder().encode
    orders = {tuple(order) for order, _, _ in planned}
    assert ("a", level_name("b", 5), "b") in orders and len(orders) > 1  # the queues named changed
    assert len(sent) == len(planned)
    for call, (order, since, _) in zip(sent, planned, strict=True):
        ack = next((raw for raw in acks if raw is not None and call.args[0] == raw), None)
        text = _as_text(fetcher, order, since, ack, "")
        assert call.script == text.script
        assert [encode(k) for k in call.keys] == [encode(k) for k in text.keys]
        assert [encode(a) for a in call.args] == [encode(a) for a in text.args]
    assert all(isinstance(k, bytes) for k in sent[-1].keys[2:])  # encoded ahead: the fixed keys, the queues


def test_the_lookahead_fetches_send_what_their_keys_as_text_encode_to(config: Any) -> None:
    """Both look-ahead scripts take the same fixed keys and arguments, encoded once."""
    from cogworker.engine.fetch import ahead
    from cogworker.transitions.call import as_command

    fetcher = Fetcher(config, "host:1:aa", [("a", None), ("b", None)], block_timeout=0.0)
    keys, encode = fetcher.keys, config.redis().get_encoder().encode
    acks: list[tuple[bytes, str | None]] = [(b'{"jid":"j1"}', "j1"), (b'{"jid":"j2"}', None)]
    fixed = dict(
        in_progress=fetcher.in_progress,
        fence=fetcher.fence_key,
        last_beat=keys.last_beat,
        wake=keys.wake,
        paused=keys.paused,
        ahead=keys.ahead,
        owner=fetcher.identity,
        number=7,
        identity=fetcher.beat_as,
        queue_prefix=keys.queue_prefix,
    )
    queues = [keys.queue("a"), keys.queue("b")]
    text = scripts.fetch_ahead(
        **fixed,
        orphans=[keys.orphanings("j1"), keys.orphanings("j2")],
        queues=queues,
        k=3,
        acks=[a for a, _ in acks],
        since="s",
    )
    sent = ahead.command(fetcher, fetcher._fixed(), "sha", ["a", "b"], 7, 3, acks, "s")
    assert [encode(part) for part in sent] == [encode(part) for part in as_command("sha", text)]

    _, multi = ahead.moved_commands(fetcher, fetcher._fixed(), "sha", ["a", "b"], 7, 3, acks, 1, "s")
    moved = scripts.fetch_ahead_moved(
        **fixed,
        queues=queues,
        k=3,
        mark=b"\x00cogworker:fetch-mark:7",
        guess=scripts.FIRST_QUEUE_AHEAD_MOVED + 1,
        since="s",
    )
    script = multi[-2]
    assert isinstance(script, tuple)
    assert [encode(part) for part in script] == [encode(part) for part in as_command("sha", moved)]
    assert isinstance(script[3], bytes)  # encoded ahead: the fixed keys
