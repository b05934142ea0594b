"""The first documented Heroku line, kept as users copied it: TLS options appended to
whatever REDIS_URL is, a laptop's plain redis:// URL included (ignored there, with one
warning)."""

from __future__ import annotations

import os

import cogworker
from apps.basic import add  # noqa: F401  (the jobs the workers run)

cogworker.configure(redis_url=os.environ["REDIS_URL"] + "?ssl_cert_reqs=none")
