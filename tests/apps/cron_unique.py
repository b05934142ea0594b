"""A unique every-second entry whose job takes longer than the interval."""

import cogworker
from apps.cron_jobs import slow

cogworker.periodic("* * * * * *", slow, args=("u", 2.2), name="long-unique", unique=True)
