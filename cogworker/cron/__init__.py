"""Periodic (cron) jobs: entries registered at import, each slot fired once fleet-wide
(docs/architecture.md#periodic).

The public face is this package: ``cogworker.cron.disabled()``, ``cogworker.cron.schedule()``,
``disable``, ``enable``, ``run_now`` and ``periodic`` (also ``cogworker.periodic``).
Inside: ``expr`` (cron expressions) < ``claims`` (a slot's claim, its push and its lock)
< ``control`` (operating entries from anywhere) < ``ticker`` (the registered entries and
the ticker that fires them).
"""

from __future__ import annotations

from .control import disable, disabled, enable, run_now, schedule
from .ticker import periodic

__all__ = ["disable", "disabled", "enable", "periodic", "run_now", "schedule"]
