"""A prefork app with a periodic entry, for the Redis outage tests: its jobs log each
run to $PF_LOG (Redis is down part of the time), and the entry fires every second."""

from __future__ import annotations

import cogworker
from apps.pf_log import log


@cogworker.job
def logged(tag):
    log("start", tag)
    log("end", tag)


cogworker.periodic("* * * * * *", logged, args=("periodic",), name="every-second")
