"""Whether the Redis we run on can lose jobs by its own settings (docs/architecture.md#durability):
an eviction policy other than ``noeviction`` drops keys (queued jobs among them) under memory
pressure, silently; without AOF a restart loses what came after the last RDB snapshot (with
no persistence at all: everything). Read at boot by the master and the runner (one WARNING
line each) and by ``cogworker health``. Nothing is written."""

from __future__ import annotations

import logging
from typing import Any

import redis

logger = logging.getLogger("cogworker")

SAFE_FSYNC = ("everysec", "always")


def settings(client: redis.Redis) -> dict[str, str]:
    """maxmemory-policy, appendonly, appendfsync and save, as the server has them: from INFO
    (readable where CONFIG is renamed away, as on many managed services), CONFIG GET for the
    rest when it is allowed; a setting that can't be read is left out."""
    found: dict[str, str] = {}
    info: dict[str, Any] = client.info("memory")
    if "maxmemory_policy" in info:
        found["maxmemory-policy"] = str(info["maxmemory_policy"])
    info = client.info("persistence")
    if "aof_enabled" in info:
        found["appendonly"] = "yes" if str(info["aof_enabled"]) == "1" else "no"
    for name in ("appendfsync", "save"):
        try:
            reply = client.config_get(name)
        except redis.ResponseError:  # CONFIG disabled or not granted: INFO is all we have
            continue
        for key, value in reply.items():
            found[_text(key)] = _text(value)
    return found


def risks(found: dict[str, str]) -> list[str]:
    """One sentence per way these settings can lose jobs (none: safe as configured)."""
    said: list[str] = []
    policy = found.get("maxmemory-policy")
    if policy is not None and policy != "noeviction":
        said.append(f"Redis maxmemory-policy is {policy!r}: under memory pressure Redis deletes keys, queued jobs "
                    "among them, without a word; set maxmemory-policy noeviction (then a full Redis refuses "
                    "writes, and cogworker waits instead of losing jobs)")
    aof, save, fsync = found.get("appendonly"), found.get("save"), found.get("appendfsync")
    if aof == "no":
        if save == "":
            lost = "persists nothing (appendonly no, save \"\"): a restart of Redis loses every queued, scheduled " \
                   "and retrying job"
        elif save is None:  # CONFIG not allowed: the snapshot schedule is unknown
            lost = "has appendonly no: a restart of Redis loses the jobs enqueued since its last RDB snapshot " \
                   "(every job, if it takes none)"
        else:
            lost = f"persists only RDB snapshots (save {save!r}, appendonly no): a crash or restart of Redis loses " \
                   "the jobs enqueued since the last snapshot"
        said.append(f"Redis {lost}; set appendonly yes, appendfsync everysec")
    elif aof == "yes" and fsync is not None and fsync not in SAFE_FSYNC:
        said.append(f"Redis appendfsync is {fsync!r}: a crash of Redis's host loses up to about 30 s of jobs; "
                    "set appendfsync everysec (at most about 1 s)")
    return said


def check(client: redis.Redis) -> list[str]:
    return risks(settings(client))


def warn_at_boot(client: redis.Redis, who: str) -> None:
    """One WARNING line per risk; Redis away or refusing INFO: nothing (the outage is
    logged where it matters, and the next boot checks again)."""
    try:
        found = check(client)
    except redis.RedisError as exc:
        logger.debug("%s: Redis's persistence and eviction settings not read (%s)", who, type(exc).__name__)
        return
    for risk in found:
        logger.warning("%s: %s", who, risk)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
