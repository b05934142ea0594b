"""An app module configured as the README's Heroku passage says (REDIS_URL is Heroku's
plain rediss:// URL; the self-signed certificate needs verification off)."""

from __future__ import annotations

import os

import cogworker
from apps.basic import add  # noqa: F401  (the jobs the workers run)

cogworker.configure(redis_url=os.environ["REDIS_URL"] + "?ssl_cert_reqs=none")
