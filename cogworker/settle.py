"""Where a job goes after it ran: retry or dead, interruptions, bad payloads, and the
settlements a worker could not make yet (DESIGN §5)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from .config import Config
from .jobs import error_class_name, error_message

MAX_INTERRUPTS = 3
INTERRUPT_DELAY = 30  # seconds, times the interruption count
RAW_PAYLOAD_LIMIT = 100_000

ACK = "ack"  # a pending settlement: the job finished, only its ack is missing


@dataclass(frozen=True)
class Filing:
    """A failure record to write: ``entry`` into ``zset`` at ``score``."""

    zset: str
    score: float
    entry: str
    retrying: bool
    delay: float = 0.0

    def record(self) -> str:
        """What ``unsettled`` holds for it: any live process can file it from this alone."""
        return json.dumps({"set": self.zset, "score": self.score, "payload": self.entry})


def max_retries(payload: dict[str, Any]) -> int:
    retry = payload.get("retry", 25)
    if retry is False:
        return 0
    if retry is True:
        return 25
    try:
        return max(0, int(retry))
    except (TypeError, ValueError):
        return 25


def route_failure(config: Config, payload: dict[str, Any], error: BaseException, backoff: Any) -> Filing:
    """The retry/dead record for a job that ran and raised ``error``.

    ``payload`` is updated with the failure fields (it is the job as it will be stored).
    ``backoff(count, error)`` gives the delay before the next attempt.
    """
    now = time.time()
    count = int(payload.get("retry_count") or 0) + 1
    payload.update(retry_count=count, error_class=error_class_name(error),
                   error_message=error_message(error), failed_at=now)
    if count <= max_retries(payload):
        delay = float(backoff(count, error))
        return Filing(config.keys.retry, now + delay, json.dumps(payload), True, delay)
    return Filing(config.keys.dead, now, json.dumps(payload), False)


def interruption(config: Config, raw: bytes, error: BaseException) -> Filing:
    """The record for a job that ran and failed, but whose failure could not be filed.

    Built from the payload as fetched (always JSON) plus the failure fields, never from
    the in-memory job: whatever made that one fail to serialize must not do it again.
    Never back on the queue: a write that fails every time would re-run it forever.
    """
    payload = json.loads(raw)
    count = int(payload.get("interrupted_count") or 0) + 1
    attempt = int(payload.get("retry_count") or 0) + 1
    now = time.time()
    payload.update(interrupted_count=count, retry_count=attempt, error_class=error_class_name(error),
                   error_message=error_message(error), failed_at=now)
    if attempt > max_retries(payload) or count > MAX_INTERRUPTS:
        return Filing(config.keys.dead, now, json.dumps(payload), False)
    delay = INTERRUPT_DELAY * count
    return Filing(config.keys.retry, now + delay, json.dumps(payload), True, delay)


def plain_dead(config: Config, raw: bytes, error_class: str, message: str, jid: str | None = None) -> Filing:
    """The simplest dead entry: for what isn't a job at all, or can't be built into one."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    entry: dict[str, Any] = {"error_class": error_class, "error_message": message,
                             "failed_at": time.time(), "raw_payload": text[:RAW_PAYLOAD_LIMIT]}
    if jid:
        entry["jid"] = jid
    return Filing(config.keys.dead, entry["failed_at"], json.dumps(entry), False)


def parse_payload(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """The job object, or None and why it isn't one."""
    try:
        payload = json.loads(raw)
    except UnicodeDecodeError:
        return None, "payload is not UTF-8 text"
    except ValueError as exc:
        return None, f"payload is not JSON: {exc}"
    if not isinstance(payload, dict):
        return None, f"payload is JSON but not an object (a {type(payload).__name__})"
    if not isinstance(payload.get("class"), str) or not payload["class"]:
        return None, "payload has no 'class' naming the job"
    if not isinstance(payload.get("jid"), str):
        return None, "payload has no 'jid'"
    return payload, ""


class Pending:
    """Settlements this process owes Redis: ``raw -> ACK | Filing``.

    Kept so that the process's own reconcile finishes them instead of mistaking the
    entry for a stray and re-running a job that already ran.
    """

    def __init__(self) -> None:
        self.items: dict[bytes, str | Filing] = {}

    def add(self, raw: bytes, how: str | Filing) -> None:
        self.items[raw] = how

    def pop(self, raw: bytes) -> None:
        self.items.pop(raw, None)

    def __contains__(self, raw: object) -> bool:
        return raw in self.items

    def __len__(self) -> int:
        return len(self.items)

    def acks(self) -> list[bytes]:
        return [raw for raw, how in self.items.items() if how == ACK]

    def filings(self) -> dict[bytes, Filing]:
        return {raw: how for raw, how in self.items.items() if isinstance(how, Filing)}
