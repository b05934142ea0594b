"""An app module configured as the README's Heroku passage says: REDIS_URL is Heroku's
plain rediss:// URL (the self-signed certificate needs verification off), or a laptop's
redis:// one (no TLS, nothing to add)."""

from __future__ import annotations

import os

import cogworker
from apps.basic import add  # noqa: F401  (the jobs the workers run)

url = os.environ.get("REDIS_URL", "redis://localhost:6379/0")
if url.startswith("rediss://"):  # Heroku Redis: TLS, with a self-signed certificate
    url += "?ssl_cert_reqs=none"
cogworker.configure(redis_url=url)
