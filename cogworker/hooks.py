"""``cogworker.hooks``, a public path: ``from cogworker import hooks`` and
``from cogworker.hooks import subscribe`` name the same things, whose home is
``core/hooks.py`` (see there for the events)."""

from __future__ import annotations

from .core.hooks import EVENTS, Hook, JobEvent, subscribe, unsubscribe

__all__ = ["EVENTS", "Hook", "JobEvent", "subscribe", "unsubscribe"]
