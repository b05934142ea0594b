"""Which batch a job belongs to, for the job page: its payload names it (``wf.b``) while
the job waits somewhere; otherwise (running, finished) only a batch named by the link
(``?batch=<bid>``) and confirmed by that batch's jobs hash, never a guess."""

from __future__ import annotations

from typing import Any

from .. import routing
from ..config import Config, get_config


def batch_of(
    jid: str, payload: dict[str, Any] | None = None, hint: str | None = None, config: Config | None = None
) -> str | None:
    wf = (payload or {}).get("wf")
    named = wf.get("b") if isinstance(wf, dict) else None
    if isinstance(named, str) and named:
        return named
    if not hint or len(hint) > 200:
        return None
    config = config or get_config()
    held = any(part.redis().hexists(part.keys.batch_jobs(hint), jid) for part in routing.parts(config))
    return hint if held else None
