"""The prefork idle-queues test's app (tests/test_fetch_idle_queues.py): apps.pf_faults's
jobs, with the children's rescan of left-out queues made long, so a job that waits for
it (a wake the fetch missed) shows, rather than hiding behind the 50 ms default."""

from __future__ import annotations

from apps import pf_faults  # noqa: F401  (its jobs: registered for the children)
from cogworker.engine.fetch import idle as emptyqueues

emptyqueues.RESCAN = 5.0
