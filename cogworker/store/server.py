"""Which server cogworker talks to, and what of what cogworker uses it lacks
(docs/architecture.md#servers): Redis, Valkey or Dragonfly, told apart by INFO server
(Valkey and Dragonfly both report a ``redis_version`` for compatibility, 7.2.4 and 7.4.0,
beside their own version). Read at boot by the master and the runner: a server too old for
reliable fetch is refused (``RedisVersionError``), and each feature it lacks is one WARNING
line saying which version has it and what cogworker does without it."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis

from ..errors import RedisVersionError

logger = logging.getLogger("cogworker")

MIN_REDIS_VERSION = (6, 2)
# Redis 7.0 (and every Valkey, which starts at 7.2) scans many queues in one LMPOP; older
# Redis get one LMOVE per queue instead (the same jobs, more commands per idle fetch).
LMPOP_SINCE = (7, 0)


@dataclass(frozen=True)
class Server:
    """``name`` (Redis, Valkey or Dragonfly), its own ``version``, and the Redis version
    it claims to be compatible with (``compat``: what its commands follow)."""

    name: str
    version: str
    compat: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def _numbers(text: object) -> tuple[int, ...]:
    found = re.search(r"(\d+(?:\.\d+)*)", str(text))
    return tuple(int(part) for part in found.group(1).split(".")) if found else ()


def identify(info: Mapping[str, Any]) -> Server:
    """The server, from its INFO server section."""
    compat = _numbers(info.get("redis_version", "0"))
    if "dragonfly_version" in info:
        return Server("Dragonfly", str(info["dragonfly_version"]).removeprefix("df-v").removeprefix("v"), compat)
    if "valkey_version" in info or str(info.get("server_name", "")).lower() == "valkey":
        return Server("Valkey", str(info.get("valkey_version", info.get("redis_version", "?"))), compat)
    return Server("Redis", str(info.get("redis_version", "?")), compat)


def refusal(server: Server) -> str | None:
    """Why cogworker can't run on this server at all (None: it can)."""
    if server.compat[:2] < MIN_REDIS_VERSION:
        claims = "" if server.name == "Redis" else f" (as Redis {'.'.join(map(str, server.compat))})"
        return f"{server}{claims} is too old: cogworker's reliable fetch needs Redis >= 6.2 (LMOVE, BLMOVE, LPOS)"
    return None


def lacking(server: Server) -> list[str]:
    """One sentence per thing cogworker uses that this server lacks, with which version has it."""
    said: list[str] = []
    if server.compat[:2] < LMPOP_SINCE:
        said.append(
            f"{server} lacks LMPOP (Redis 7.0, Valkey 7.2): a fetch over many queues tries them one "
            "LMOVE at a time instead of one LMPOP per 500"
        )
    if server.name == "Dragonfly":
        said.append(
            f"{server} is untested: cogworker's test suite does not run on Dragonfly (its scripts keep "
            "Dragonfly's rules, each touching only the keys it is given, checked without it)"
        )
    return said


def check(client: redis.Redis) -> Server:
    """The server, or ``RedisVersionError`` (one line) where cogworker can't run on it."""
    server = identify(client.info("server"))
    refused = refusal(server)
    if refused:
        raise RedisVersionError(refused)
    return server


def warn_lacking(client: redis.Redis, who: str) -> None:
    """One WARNING line per thing the server lacks; Redis away: nothing (the outage is
    logged where it matters, and the next boot checks again)."""
    try:
        server = identify(client.info("server"))
    except redis.RedisError as exc:
        logger.debug("%s: Redis's version not read (%s)", who, type(exc).__name__)
        return
    for line in lacking(server):
        logger.warning("%s: %s", who, line)
