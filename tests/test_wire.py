"""cogworker.wire: the hot path's commands packed by hand; a large argument is sent from
the caller's own bytes (never copied), the rest exactly as hiredis packs it."""

from __future__ import annotations

import json

import hiredis
import pytest

from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.store import wire

BIG = b"{" + b"x" * (wire.BIG + 10) + b"}"


def test_same_bytes_as_hiredis_and_the_large_argument_not_copied():
    commands = [("MULTI",), ("LREM", "list:é", -1, BIG), ("LPUSH", "list:é", b"mark"), ("SET", BIG, BIG), ("EXEC",)]
    out = wire.packed(None, commands)
    assert b"".join(out) == b"".join(hiredis.pack_command(c) for c in commands)
    assert sum(part is BIG for part in out) == 3
    assert all(len(part) < wire.BIG for part in out if part is not BIG)


def test_small_commands_are_one_buffer():
    commands = [("MULTI",), ("LPUSH", "l", b"x" * 100), ("EXEC",)]
    assert wire.packed(None, commands) == [b"".join(hiredis.pack_command(c) for c in commands)]


def test_round_trip_through_redis(config):
    conn = config.redis().connection_pool.get_connection()
    try:
        conn.send_packed_command(
            wire.packed(conn, [("SET", "wire:k", BIG), ("STRLEN", "wire:k"), ("GETRANGE", "wire:k", -3, -1)])
        )
        assert [conn.read_response() for _ in range(3)] == [b"OK", len(BIG), b"xx}"]
    finally:
        config.redis().connection_pool.release(conn)


def test_an_argument_redis_can_not_take_is_refused():
    with pytest.raises(TypeError):
        wire.packed(None, [("SET", "k", 1.5, BIG)])


def _big_job(i: int) -> bytes:
    return json.dumps(
        {
            "class": "apps.core_jobs.record",
            "args": ["x" * (wire.BIG * 3)],
            "kwargs": {},
            "jid": f"{i:024x}",
            "queue": "a",
            "retry": 3,
            "created_at": 1.0,
        }
    ).encode()


def test_fast_fetches_ack_large_jobs_sent_from_their_own_bytes(config):
    """The fast fetch's MULTI with a large ack (plain and looked-ahead): each job fetched
    once, in order, and acked off the list."""
    r, k = config.redis(), config.keys
    jobs = [_big_job(i) for i in range(6)]
    r.lpush(k.queue("a"), *jobs)
    f = Fetcher(config, "host:1:wire", [("a", None)], block_timeout=0)
    got = [f.fetch()]
    got.append(f.fetch(ack=got[-1].raw))
    got.append(f.read_ahead(f.send_ahead(1, got[-1].raw)))
    got.append(f.fetch(ack=got[-1].raw))
    got.append(f.read_ahead(f.send_ahead(2, got[-1].raw)))
    assert f.fetch(ack=got[-1].raw).raw == jobs[5]
    assert [w.raw for w in got] == jobs[:5]
    assert r.lrange(f.in_progress, 0, -1) == [jobs[5]] and r.llen(k.queue("a")) == 0
    f.close()


def _exchange(conn, commands):
    conn.send_packed_command(wire.packed(conn, commands))
    return wire.replies(conn, len(commands))


def test_replies_read_in_a_loop_are_read_responses_with_errors_as_values(config):
    """hiredis's reader in a loop: the same replies as read_response, an error reply as its
    exception (not raised), a large reply that takes several reads whole."""
    pool = config.redis().connection_pool
    conn = pool.get_connection()
    try:
        big = [("SET", "wire:k", BIG), ("GET", "wire:k")] * 20
        got = _exchange(
            conn,
            [
                ("SET", "wire:k", b"s"),
                ("MULTI",),
                ("INCR", "wire:n"),
                ("LPUSH", "wire:k", b"x"),
                ("EXEC",),
                *big,
                ("WRONG",),
            ],
        )
        assert got[:4] == [b"OK", b"OK", b"QUEUED", b"QUEUED"]
        assert got[4][0] == 1 and isinstance(got[4][1], wire.ResponseError)  # inside EXEC: WRONGTYPE
        assert got[5:-1] == [b"OK", BIG] * 20
        assert isinstance(got[-1], wire.ResponseError) and "unknown command" in str(got[-1])
        assert _exchange(conn, [("PING",)]) == [b"PONG"]  # nothing left unread
    finally:
        pool.release(conn)


def test_replies_through_read_response_for_another_parser(config):
    import redis
    from redis._parsers import _RESP2Parser

    r = redis.Redis.from_url(config.redis_url, parser_class=_RESP2Parser, protocol=2)
    conn = r.connection_pool.get_connection()
    try:
        got = _exchange(conn, [("SET", "wire:k", b"v"), ("LPUSH", "wire:k", b"x"), ("GET", "wire:k")])
        assert got[0] == b"OK" and isinstance(got[1], wire.ResponseError) and got[2] == b"v"
    finally:
        r.connection_pool.release(conn)
        r.close()
