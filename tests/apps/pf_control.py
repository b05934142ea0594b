"""The prefork test jobs (apps.pf), with a fast heartbeat: an operator's request through
Redis (api.quiet_process/stop_process) is taken on the heartbeat."""

from __future__ import annotations

import cogworker
from apps.pf import record, slow  # noqa: F401 (registers the jobs)

cogworker.configure(heartbeat_interval=0.3, orphan_threshold=5.0)
