"""An app module configured as the Deploying page's Heroku passage says: REDIS_URL is Heroku's
plain rediss:// URL (the self-signed certificate needs verification off), or a laptop's
redis:// one (no TLS, nothing to add)."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit

import cogworker
from apps.basic import add  # noqa: F401  (the jobs the workers run)

url = os.environ.get("REDIS_URL", "redis://localhost:6379/0")
parts = urlsplit(url)
if parts.scheme == "rediss":  # Heroku Redis: TLS, with a self-signed certificate
    query = dict(parse_qsl(parts.query), ssl_cert_reqs="none")  # a query it already has is kept
    url = parts._replace(query=urlencode(query)).geturl()
cogworker.configure(redis_url=url)
