"""A registered periodic entry: what it runs, on which schedule, with which options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entry:
    pjid: str
    cron: str
    job_name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    queue: str = "default"
    retry: int = 25
    unique: bool = False
    tz: str = "UTC"
    catch_up: bool | None = None
