"""Process records: who is alive, what they run (DESIGN §4 ``processes``, ``process:*``,
``last_beat``, ``workers:*``). One pipeline per beat, whatever the number of processes."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from . import lua
from .config import Config


@dataclass
class ProcessRecord:
    identity: str
    role: str  # master | child | worker
    pid: int
    queues: list[str]
    started_at: float = field(default_factory=time.time)
    busy: int = 0
    rss: int = 0
    # What it runs now (the UI's workers view): {"jid", "class", "queue", "run_at", "payload"}
    running: dict[str, Any] | None = None
    owns_list: bool = True

    def fields(self) -> dict[str, Any]:
        return {"host": socket.gethostname(), "pid": self.pid, "role": self.role,
                "queues": ",".join(self.queues), "busy": self.busy, "rss": self.rss,
                "started_at": self.started_at, "beat_at": time.time()}


def process_ttl(config: Config) -> int:
    # Several missed beats before the record lapses; orphan recovery additionally waits
    # for last_beat to be older than orphan_threshold.
    return max(int(config.heartbeat_interval * 6), 10)


def beat(config: Config, records: list[ProcessRecord], client: Any = None) -> None:
    keys = config.keys
    ttl = process_ttl(config)
    now = time.time()
    pipe = (client or config.redis()).pipeline(transaction=False)
    for rec in records:
        pipe.sadd(keys.processes, rec.identity)
        pipe.hset(keys.process(rec.identity), mapping=rec.fields())
        pipe.expire(keys.process(rec.identity), ttl)
        pipe.hset(keys.last_beat, rec.identity, now)
        if rec.owns_list:
            pipe.sadd(keys.in_progress_identities, rec.identity)
        if rec.running:
            pipe.hset(keys.workers(rec.identity), mapping={k: v if isinstance(v, (str, int, float)) else
                                                           json.dumps(v) for k, v in rec.running.items()})
            pipe.expire(keys.workers(rec.identity), ttl)
        else:
            pipe.delete(keys.workers(rec.identity))
    pipe.execute()


def deregister(config: Config, identity: str, client: Any = None) -> bool:
    """Drop a process's records; True if its in-progress list was empty and it is forgotten."""
    keys = config.keys
    return lua.run(client or config.redis(), "forget",
                   [keys.in_progress(identity), keys.in_progress_identities, keys.last_beat, keys.processes,
                    keys.process(identity), keys.workers(identity), keys.ahead], [identity]) == 1


def rss_of(pid: int | None = None) -> int:
    try:
        import psutil

        return psutil.Process(pid or os.getpid()).memory_info().rss
    except Exception:  # the process may be gone by now
        return 0
