"""The DEBUG line for each finished job (docs/architecture.md#logs), as a lifecycle hook
subscriber: subscribed only when the worker commands run at DEBUG, so at INFO a job
costs no log call (its start line is in ``execute``, its failure line in ``settling``)."""

from __future__ import annotations

import logging

from ..config import logger
from ..core import hooks


def enable() -> None:
    """Logs each success at DEBUG, if DEBUG is on for the ``cogworker`` logger."""
    if logger.isEnabledFor(logging.DEBUG):
        hooks.install(subscribers())


def subscribers() -> list[hooks.Subscription]:
    """The log line's hook (``enable`` installs it when DEBUG is on)."""
    return [hooks.Subscription(("succeeded",), _succeeded)]


def _succeeded(event: hooks.JobEvent) -> None:
    payload = event.payload
    ms = None if event.duration is None else round(event.duration * 1000, 3)
    logger.debug(
        "done: %s jid=%s in %s ms",
        payload.get("class"),
        payload.get("jid"),
        ms,
        extra={
            "event": "job_succeeded",
            "jid": payload.get("jid"),
            "job_class": payload.get("class"),
            "queue": event.queue or payload.get("queue"),
            "duration_ms": ms,
            "outcome": "succeeded",
        },
    )
