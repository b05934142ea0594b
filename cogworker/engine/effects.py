"""cogworker's own behaviour on a job's transitions, as one list of hook subscribers
(docs/architecture.md#hooks), as Dramatiq's default middleware is one list: no module
subscribes when it is imported; each process installs this list where it is put together
(``hooks.install(builtin_subscribers())``): the prefork master (``Master.__init__``), the
child (``child_main``), the single-process runner (``boot``), and a ``Worker`` made without
a list of its own (the benches', the tests')."""

from __future__ import annotations

from ..core import hooks
from ..cron import claims as cron_claims
from ..lifecycle import history, stats, unique


def builtin_subscribers() -> list[hooks.Subscription]:
    """In the order a process installs them (and its hooks then run)."""
    return [
        *history.subscribers(),  # status, history, the done ring
        *stats.subscribers(),  # processed/failed counts and throughput
        *unique.subscribers(),  # a unique job's lock: released, extended
        *cron_claims.subscribers(),  # a periodic entry's running lock: extended, released
    ]
