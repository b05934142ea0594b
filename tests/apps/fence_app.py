"""Jobs for the fencing tests: every start and end is one line appended to a file (one
os.write with O_APPEND), so the record holds while Redis is paused. Short liveness
settings: a process is declared dead after 6 s of an unchanged beat."""

from __future__ import annotations

import os
import time

import cogworker
from apps import pf  # noqa: F401  (only registered jobs run: the boot-recovery test's jobs are pf's)
from cogworker.config import Config

THRESHOLD = 6.0
_settings: dict[str, float] = {"orphan_threshold": THRESHOLD, "heartbeat_interval": 0.5}
if "recovery_interval" in Config.__dataclass_fields__:  # so the same app runs on the code before fencing
    _settings["recovery_interval"] = 0.5
cogworker.configure(**_settings)


def log_event(tag: str, event: str) -> None:
    path = os.environ.get("FENCE_LOG")
    if not path:
        return
    line = f"{tag} {os.getpid()} {event} {time.time():.6f}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@cogworker.job
def work(tag, seconds):
    log_event(tag, "start")
    time.sleep(seconds)
    log_event(tag, "end")
