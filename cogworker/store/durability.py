"""Whether the Redis we run on can lose jobs by its own settings (docs/architecture.md#durability):
an eviction policy other than ``noeviction`` drops keys (queued jobs among them) under memory
pressure, silently; without AOF a restart loses what came after the last RDB snapshot (with
no persistence at all: everything). Read at boot by the master and the runner (one WARNING
line each) and by ``cogworker health``. Nothing is written.

``require_aof``: whether ``durability="aof"`` can hold here (docs/architecture.md#durable-mode),
asked once per process at its first connect; refused in one line where it can't. It writes
one short-lived probe key."""

from __future__ import annotations

import logging
import time
from typing import Any

import redis

from ..errors import ConfigurationError
from . import server

logger = logging.getLogger("cogworker")

SAFE_FSYNC = ("everysec", "always")
WAITAOF_SINCE = "Redis 7.2 or Valkey 7.2"
# A WAITAOF answered this soon after the one before it, with appendfsync everysec, came
# before any fsync: an honest server fsyncs at most once a second (measured on Valkey 9.1.2
# with strace: it answers in about 1 ms while its fsync comes 0.3-0.9 s later).
TOO_SOON = 0.1
# (URL, trust_everysec) already accepted by this process (a forked child inherits them).
_accepted: set[tuple[str, bool]] = set()


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
        said.append(
            f"Redis maxmemory-policy is {policy!r}: under memory pressure Redis deletes keys, queued jobs "
            "among them, without a word; set maxmemory-policy noeviction (then a full Redis refuses "
            "writes, and cogworker waits instead of losing jobs)"
        )
    aof, save, fsync = found.get("appendonly"), found.get("save"), found.get("appendfsync")
    if aof == "no":
        if save == "":
            lost = (
                'persists nothing (appendonly no, save ""): a restart of Redis loses every queued, scheduled '
                "and retrying job"
            )
        elif save is None:  # CONFIG not allowed: the snapshot schedule is unknown
            lost = (
                "has appendonly no: a restart of Redis loses the jobs enqueued since its last RDB snapshot "
                "(every job, if it takes none)"
            )
        else:
            lost = (
                f"persists only RDB snapshots (save {save!r}, appendonly no): a crash or restart of Redis loses "
                "the jobs enqueued since the last snapshot"
            )
        said.append(f"Redis {lost}; set appendonly yes, appendfsync everysec")
    elif aof == "yes" and fsync is not None and fsync not in SAFE_FSYNC:
        said.append(
            f"Redis appendfsync is {fsync!r}: a crash of Redis's host loses up to about 30 s of jobs; "
            "set appendfsync everysec (at most about 1 s)"
        )
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


def require_aof(client: redis.Redis, url: str, probe_key: str, trust_everysec: bool = False) -> None:
    """Raises ``ConfigurationError`` (one line) unless WAITAOF on this server means what it
    says: the server has WAITAOF, AOF is on, and appendfsync is ``always``, or ``everysec``
    on a server that waits for its fsync (or the user trusts it). Once per URL and process."""
    if (url, trust_everysec) in _accepted:
        return
    found = settings(client)
    name = _server_name(client)
    if not _has_waitaof(client):
        raise ConfigurationError(
            f"durability='aof' needs WAITAOF, which {name} lacks: it needs {WAITAOF_SINCE} or later"
        )
    if found.get("appendonly") != "yes":
        raise ConfigurationError(
            f"durability='aof' needs Redis's append-only file, and {name} has appendonly no: set appendonly yes, "
            "appendfsync always"
        )
    fsync = found.get("appendfsync")
    if fsync == "no":
        raise ConfigurationError(
            f"durability='aof' needs Redis to fsync, and {name} has appendfsync no (the OS flushes when it likes): "
            "set appendfsync always"
        )
    if fsync != "always" and not trust_everysec:
        _refuse_if_early(client, probe_key, name, fsync)
    _accepted.add((url, trust_everysec))


def _refuse_if_early(client: redis.Redis, probe_key: str, name: str, fsync: str | None) -> None:
    """Three writes, each followed by WAITAOF 1 0: the second and third must each wait for
    the once-a-second fsync. Both answered within ``TOO_SOON``: the server answers before it
    fsyncs (an honest one costs about 2 s here, once per process)."""
    took: list[float] = []
    for round_ in range(3):
        started = time.monotonic()
        client.set(probe_key, round_, px=60_000)  # bounded: gone in a minute
        reply = client.execute_command("WAITAOF", 1, 0, 3000)
        took.append(time.monotonic() - started)
        if int(reply[0]) < 1:
            raise ConfigurationError(f"durability='aof': {name} did not fsync a write to its append-only file in 3 s")
        if round_ == 1 and took[1] >= TOO_SOON:
            return  # it waited for its next fsync, as an honest server must
    if max(took[1:]) < TOO_SOON:
        said = f"appendfsync {fsync}" if fsync else "appendfsync unknown (CONFIG GET refused)"
        raise ConfigurationError(
            f"durability='aof' refused: {name} ({said}) answered WAITAOF {took[2] * 1000:.1f} ms after a write, "
            "before it can have fsynced it (Valkey 8.0-9.1 with everysec does); set appendfsync always, or "
            "durability_trust_everysec=True to accept losing up to ~1 s of writes to a crash of its host"
        )


def _has_waitaof(client: redis.Redis) -> bool:
    """Asked of WAITAOF itself, waiting for nothing (COMMAND may be renamed away)."""
    try:
        client.execute_command("WAITAOF", 0, 0, 1)
    except redis.ResponseError as exc:
        return "unknown command" not in str(exc).lower()
    return True


def _server_name(client: redis.Redis) -> str:
    """``Valkey 9.1.2``, ``Redis 7.0.15`` or ``Dragonfly 1.34.1``, from INFO server."""
    return str(server.identify(client.info("server")))
