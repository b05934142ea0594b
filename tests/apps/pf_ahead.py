"""Jobs for the look-ahead tests with real prefork children
(tests/test_lookahead_k_prefork.py). Every run is logged to the file $PF_LOG
(``apps.pf_faults.log``: one line per event, appended with one ``os.write``).

``step(tag)`` is a short job: on a deep queue its child's K grows (docs/architecture.md#lookahead-k).
``step(tag, True)`` is a candidate blocker: it blocks (until the file $PF_GATE exists) if,
when it starts, at least two jobs of its child's look-ahead that have not started sit
behind it on the child's own in-progress list, and fewer than $PF_BLOCKERS children (one
blocker each) are blocked already. Behind it means newer than it on the list: a child
starts the jobs it holds oldest first, so every entry newer than the job it runs is one
it fetched ahead and has not started. The blocker logs those (``held``, oldest first)
before it logs ``block``. So which job blocks is decided by what Redis shows, not by
timing: the test then signals a child that holds a look-ahead of at least two jobs.

$PF_BLOCK_AT says where in the look-aheads the blocker must be, read from the child's
record in ``ahead`` (``<number>:<n>:<t>``: n jobs fetched, t taken over since): ``mid``,
inside a look-ahead (the jobs behind it are the rest of the look-ahead it came with, which it
started: n - t is more than them), or ``last``, the last of its look-ahead (the jobs behind it
are the next look-ahead, fetched while it runs, its reply not read yet: n - t is just them);
unset: either.

$PF_MIN_HELD (default 2) is how many jobs must be behind it. $PF_HOLD, when set, is the
look-ahead's ``Depth.HOLD`` in these children (and ``LONG`` with it): the K = 32 tests
set it large, so that K reaches 32 over the candidates' own round trips however loaded
the machine (the rule itself is tested on ``Depth`` directly, tests/test_lookahead_k.py).
"""

from __future__ import annotations

import json
import os
import socket
import time

from redis import Redis

import cogworker
from apps.pf_faults import log
from cogworker.config import get_config
from cogworker.engine.lookahead import Depth

if os.environ.get("PF_HOLD"):
    Depth.HOLD = float(os.environ["PF_HOLD"])
    Depth.LONG = Depth.HOLD / 3

BLOCKERS = "test:blockers"  # the pids of the children whose blocker blocks
GATE_WAIT = 60.0  # a blocker whose gate never opens ends anyway: no test hangs on it

# One blocker per child, at most $PF_BLOCKERS, decided atomically between children.
_CLAIM = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
"""

_own_list: dict[int, str] = {}  # pid -> this child's in-progress key


def own_list(r: Redis) -> str | None:
    """This process's in-progress list (its identity is host:pid:nonce)."""
    pid = os.getpid()
    if pid not in _own_list:
        pattern = get_config().keys.in_progress(f"{socket.gethostname()}:{pid}:*")
        found = [k.decode() for k in r.scan_iter(match=pattern, count=1000)]
        if len(found) != 1:
            return None
        _own_list[pid] = found[0]
    return _own_list[pid]


def tag_of(raw: bytes) -> str | None:
    try:
        return str(json.loads(raw)["args"][0])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


@cogworker.job
def step(tag: str, candidate: bool = False) -> None:
    log("start", tag)
    if candidate:
        _maybe_block(tag)
    log("end", tag)


def _maybe_block(tag: str) -> None:
    r = get_config().redis()
    limit = int(os.environ.get("PF_BLOCKERS", "1"))
    key = own_list(r)
    if key is None:
        return
    keys = get_config().keys
    pipe = r.pipeline()  # MULTI: the list and the record as of one moment
    pipe.scard(BLOCKERS)
    pipe.lrange(key, 0, -1)
    pipe.hget(keys.ahead, key[len(keys.in_progress_prefix) :])
    blocked, entries, record = pipe.execute()
    if blocked >= limit:
        return
    tags = [tag_of(raw) for raw in entries]  # newest first
    if tag not in tags:
        return
    behind = tags[: tags.index(tag)]
    if len(behind) < int(os.environ.get("PF_MIN_HELD", "2")) or not _placed(record, len(behind)):
        return
    if r.eval(_CLAIM, 1, BLOCKERS, os.getpid(), limit) != 1:
        return
    for held in reversed(behind):  # oldest first: the order the child would start them
        log("held", str(held))
    log("block", tag)
    gate = os.environ["PF_GATE"]
    deadline = time.monotonic() + GATE_WAIT
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)


def _placed(record: bytes | None, behind: int) -> bool:
    """Is the blocker where $PF_BLOCK_AT wants it? The jobs of the child's last fetch still
    its own are n - t: inside a look-ahead, the blocker is one of them (started); the last of a
    look-ahead, it is not."""
    at = os.environ.get("PF_BLOCK_AT", "")
    if not at:
        return True
    own = ahead_left(record)
    return own > behind if at == "mid" else own == behind


def ahead_left(record: bytes | None) -> int:
    """n - t of an ``ahead`` record ``<number>:<n>:<t>`` (a one-job look-ahead's is ``<number>``)."""
    if record is None:
        return 0
    parts = record.decode().split(":")
    return int(parts[1]) - int(parts[2]) if len(parts) == 3 else 1
