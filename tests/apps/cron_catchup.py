"""Every-3-seconds entries with each catch-up setting (None = the master's)."""

import cogworker
from apps.cron_jobs import tick

cogworker.periodic("*/3 * * * * *", tick, args=("default",), name="cu-default", queue="cronq")
cogworker.periodic("*/3 * * * * *", tick, args=("on",), name="cu-on", queue="cronq", catch_up=True)
cogworker.periodic("*/3 * * * * *", tick, args=("off",), name="cu-off", queue="cronq", catch_up=False)
