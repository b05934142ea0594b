"""A fleet app: every-second entries, one per test concern (a queue no master works,
so the fired payloads stay there for the tests to read)."""

import cogworker
from apps.cron_jobs import tick

cogworker.periodic("* * * * * *", tick, args=("healthy",), name="healthy", queue="cronq")
cogworker.periodic("* * * * * *", tick, args=("broken",), name="broken", queue="brokenq")
cogworker.periodic("* * * * * *", tick, args=("toggled",), name="toggled", queue="toggledq")
