"""obs_app's jobs plus a periodic entry firing every second (for cogworker_periodic_fires_total)."""

import cogworker
from apps.obs_app import ok

cogworker.periodic("* * * * * *", ok, args=("cron",), name="every-second")
