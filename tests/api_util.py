"""Entries for the operator API tests, written straight into Redis."""

from __future__ import annotations

import json
import time
import uuid


def entry(job_class: str, args: list, queue: str = "default", jid: str | None = None, **extra) -> str:
    now = time.time()
    payload = {
        "class": job_class,
        "args": args,
        "kwargs": {},
        "jid": jid or uuid.uuid4().hex,
        "queue": queue,
        "retry": 25,
        "created_at": now,
        "enqueued_at": now,
        **extra,
    }
    return json.dumps(payload, separators=(",", ":"))


def failed(
    job_class: str, args: list, queue: str = "default", jid: str | None = None, error_class: str = "ValueError"
) -> str:
    return entry(
        job_class, args, queue, jid, retry_count=1, error_class=error_class, error_message="boom", failed_at=time.time()
    )


def fill(r, key: str, entries: list[str], score0: float, step: float = 1.0, chunk: int = 5000) -> None:
    for i in range(0, len(entries), chunk):
        r.zadd(key, {e: score0 + (i + j) * step for j, e in enumerate(entries[i : i + chunk])})
