"""The FastAPI example's jobs (a worker runs them: ``cogworker-prefork examples.fastapi_app.jobs``)."""

from __future__ import annotations

import json
import time

import cogworker
from cogworker.config import get_config

OUTBOX = "example:outbox"  # where the example "sends" its mail: a Redis list, capped


@cogworker.job(retry=5)
def send_welcome(email: str) -> None:
    pipe = get_config().redis().pipeline()
    pipe.lpush(OUTBOX, json.dumps({"to": email, "subject": "welcome", "at": time.time()}))
    pipe.ltrim(OUTBOX, 0, 999)  # bounded by count, and by age below
    pipe.expire(OUTBOX, 7 * 24 * 3600)
    pipe.execute()
