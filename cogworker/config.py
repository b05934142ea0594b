"""Settings, the environment, and the Redis connection.

Connections are per process: a forked child must never share its parent's sockets, so
the client is rebuilt whenever ``os.getpid()`` changes.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from urllib.parse import urlparse

import redis

from .errors import ConfigurationError
from .keys import Keys

logger = logging.getLogger("cogworker")

DEFAULT_REDIS_URL = "redis://localhost:6379/0"


def redis_url_from_env() -> str:
    return os.environ.get("COGWORKER_REDIS_URL") or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


def validate_redis_url(url: str) -> str:
    """Reject a URL redis-py would misread later, with a message that says why."""
    try:
        parsed = urlparse(url)
        port = parsed.port  # raises ValueError on a non-numeric port
    except ValueError as exc:
        raise ConfigurationError(f"invalid Redis URL {url!r}: {exc}") from None
    if parsed.scheme not in ("redis", "rediss", "unix"):
        raise ConfigurationError(f"invalid Redis URL {url!r}: scheme must be redis://, rediss:// or unix://")
    if parsed.scheme != "unix" and not parsed.hostname:
        raise ConfigurationError(f"invalid Redis URL {url!r}: no host")
    if port is not None and not 0 < port < 65536:
        raise ConfigurationError(f"invalid Redis URL {url!r}: port out of range")
    return url


def validate_liveness(config: Config) -> None:
    """A live process's beat can lag about two heartbeat intervals (its master's beat, then
    its own), and a Redis stall up to half the threshold can go unseen between two looks:
    a threshold under 5 intervals could take a live process for a dead one."""
    for name in ("orphan_threshold", "heartbeat_interval", "recovery_interval"):
        if not getattr(config, name) > 0:
            raise ConfigurationError(f"{name} must be more than 0, got {getattr(config, name)!r}")
    if config.orphan_threshold < 5 * config.heartbeat_interval:
        raise ConfigurationError(f"orphan_threshold ({config.orphan_threshold:g}s) must be at least 5 x "
                                 f"heartbeat_interval ({config.heartbeat_interval:g}s)")


@dataclass
class Config:
    redis_url: str = field(default_factory=redis_url_from_env)
    namespace: str = "cogworker"
    # A process is dead once another has watched its beat stay unchanged this long, with
    # Redis answering throughout; its list is then requeued and the process fenced.
    orphan_threshold: float = 60.0
    max_orphanings: int = 3
    heartbeat_interval: float = 5.0
    # How often orphan recovery looks (at most orphan_threshold / 4: it must watch often
    # enough to tell a stall from a death).
    recovery_interval: float = 15.0
    # Every call has one, so a hung Redis can't freeze a loop. Blocking fetches use a
    # shorter server-side timeout than this.
    socket_timeout: float = 5.0
    socket_connect_timeout: float = 2.0
    dead_max_jobs: int = 10_000
    dead_timeout: float = 180 * 24 * 3600
    attempts_ttl: int = 7 * 24 * 3600

    def __post_init__(self) -> None:
        validate_redis_url(self.redis_url)
        validate_liveness(self)
        self.keys = Keys(self.namespace)
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None
        self._pid = 0

    def redis(self) -> redis.Redis:
        """This process's client (bytes in, bytes out: raw payloads must round-trip exactly)."""
        pid = os.getpid()
        client = self._client
        if client is None or self._pid != pid:
            with self._lock:
                if self._client is None or self._pid != pid:
                    self._client = self.new_client()
                    self._pid = pid
                client = self._client
        return client

    def new_client(self, socket_timeout: float | None = None) -> redis.Redis:
        return redis.Redis.from_url(
            self.redis_url,
            socket_timeout=socket_timeout or self.socket_timeout,
            socket_connect_timeout=self.socket_connect_timeout,
            health_check_interval=0,
            retry_on_timeout=False,
        )


_config: Config | None = None
_config_lock = threading.Lock()


def get_config() -> Config:
    global _config
    if _config is None:
        with _config_lock:
            if _config is None:
                _config = Config()
    return _config


def configure(redis_url: str | None = None, namespace: str | None = None, **settings: object) -> Config:
    """Set the Redis URL, the namespace and any other ``Config`` field; returns the config.

    Settings not given keep their current values. Unknown settings raise
    ``ConfigurationError``: a typo must not be silently ignored.
    """
    global _config
    known = set(Config.__dataclass_fields__)
    unknown = set(settings) - known
    if unknown:
        raise ConfigurationError(f"unknown setting(s) {sorted(unknown)}; known: {sorted(known)}")
    with _config_lock:
        current = _config
        kwargs = {name: getattr(current, name) for name in known} if current else {}
        kwargs.update(settings)
        if redis_url is not None:
            kwargs["redis_url"] = redis_url
        if namespace is not None:
            kwargs["namespace"] = namespace
        _config = Config(**kwargs)  # type: ignore[arg-type]
    # Scripts are cached per client; a new config means new clients.
    from . import lua

    lua.reset()
    return _config
