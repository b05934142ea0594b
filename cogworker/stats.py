"""``cogworker.stats``, a public path: ``from cogworker.stats import attempts`` and
``cogworker.stats.attempts(config, jid)`` are the same function, whose home is
``lifecycle/stats.py`` (the counters' subscriber, internal otherwise)."""

from __future__ import annotations

from .lifecycle.stats import attempts

__all__ = ["attempts"]
