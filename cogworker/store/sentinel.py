"""Sentinel URLs (docs/architecture.md#sentinel): ``redis+sentinel://[[user]:password@]host1:26379,
host2:26379/<service>/<db>`` and ``rediss+sentinel://``, opened through redis-py's Sentinel
support (``Sentinel.master_for``; ``redis.asyncio.sentinel`` for the async client).

Each client asks the sentinels for the master's address whenever it opens a connection,
so a process follows a failover on its next connect: a killed master's connections fail
(an outage, backed off), and a demoted one's answer READONLY, which redis-py turns into a
``ConnectionError`` and a disconnect (store/errors.py drops the whole pool for it too).
The password (and ``?password=``) is the master's and its replicas'; the sentinels take
``?sentinel_password=`` (none by default: Sentinel is usually unauthenticated). A
``rediss+sentinel://`` URL speaks TLS to the sentinels and to the master, with the same
``ssl_*`` options as ``rediss://``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote

if TYPE_CHECKING:
    import redis
    import redis.asyncio

SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_PORT = 26379
# Options of a URL that are ours to read, not redis-py's connection keywords.
_OURS = ("password", "username", "sentinel_password", "sentinel_username", "db")
_FLOATS = ("ssl_min_version",)


class BadSentinelUrl(ValueError):
    """Why a Sentinel URL can't be used (the message never holds the password)."""


@dataclass
class SentinelTarget:
    """What a Sentinel URL names."""

    sentinels: list[tuple[str, int]]
    service: str
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    options: dict[str, str] = field(default_factory=dict)  # ssl_* and the like, for redis-py


def is_sentinel(url: str) -> bool:
    return url.partition("://")[0].lower() in SCHEMES


def parse(url: str) -> SentinelTarget:
    """The URL's parts, or ``BadSentinelUrl`` saying what is wrong."""
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    rest = rest.partition("#")[0]
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        userinfo, hosts = "", netloc
    username, colon, password = userinfo.partition(":")
    target = SentinelTarget(_sentinels(hosts), *_service_db(path), tls=scheme.lower() == "rediss+sentinel")
    if colon:
        target.username, target.password = unquote(username) or None, unquote(password) or None
    elif userinfo:  # redis://secret@host: redis-py reads a lone name as the password
        target.password = unquote(userinfo)
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name in _OURS:
            if name == "db":
                target.db = _db(value)
            else:
                setattr(target, name, value or None)
        else:  # on a plain URL, TLS options were left out already (store/tls.py)
            target.options[name] = value
    return target


def _sentinels(hosts: str) -> list[tuple[str, int]]:
    found = []
    for item in hosts.split(","):
        item = item.strip()
        if not item:
            raise BadSentinelUrl("no sentinel host (give host1:26379,host2:26379,...)")
        if item.startswith("["):  # [::1]:26379
            host, _, port_text = item[1:].partition("]")
            port_text = port_text.removeprefix(":")
        else:
            host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        if not host:
            raise BadSentinelUrl(f"sentinel {item!r} has no host")
        if port_text and not (port_text.isascii() and port_text.isdigit()):
            raise BadSentinelUrl(f"sentinel {item!r}: the port must be a number")
        port = int(port_text) if port_text else DEFAULT_PORT
        if not 0 < port < 65536:
            raise BadSentinelUrl(f"sentinel {item!r}: port out of range")
        found.append((host, port))
    return found


def _service_db(path: str) -> tuple[str, int]:
    parts = path.split("/")
    if len(parts) > 1 and parts[-1] == "":  # a trailing slash
        parts.pop()
    if not parts[0]:
        raise BadSentinelUrl("no service name (redis+sentinel://host:26379/<service>/<db>)")
    if len(parts) > 2:
        raise BadSentinelUrl("the path is /<service>/<db>, nothing more")
    return unquote(parts[0]), _db(parts[1]) if len(parts) == 2 else 0


def _db(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise BadSentinelUrl(f"the database must be a number, got {text!r}")
    return int(text)


def _keywords(target: SentinelTarget, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """redis-py's keywords for the master's connections, and for the sentinels'."""
    extra: dict[str, Any] = {}
    for name, value in target.options.items():
        extra[name] = _value(name, value)
    if target.tls:
        extra["ssl"] = True
    # The sentinels' connections too: their timeouts, and no maintenance notifications (a
    # sentinel refuses them, and redis-py logs that for each connection: connection.client_options)
    shared = {k: v for k, v in options.items() if k.startswith("socket_") or k == "maint_notifications_config"}
    sentinel_kwargs: dict[str, Any] = {**shared, **extra}
    if target.sentinel_password:
        sentinel_kwargs["password"] = target.sentinel_password
    if target.sentinel_username:
        sentinel_kwargs["username"] = target.sentinel_username
    master = {**options, **extra, "db": target.db, "password": target.password, "username": target.username}
    return master, sentinel_kwargs


def _value(name: str, value: str) -> Any:
    if value.lower() in ("true", "false") and name != "ssl_cert_reqs":
        return value.lower() == "true"
    if name in _FLOATS or name.endswith("_timeout"):
        return float(value)
    return value


def master(url: str, options: dict[str, Any]) -> redis.Redis:
    """A client of the master the sentinels name (``options``: redis-py's client keywords)."""
    from redis.sentinel import Sentinel

    target = parse(url)
    kwargs, sentinel_kwargs = _keywords(target, options)
    kwargs["connection_class"] = _connection_class(bool(kwargs.pop("ssl", False)))
    return Sentinel(target.sentinels, sentinel_kwargs=sentinel_kwargs).master_for(target.service, **kwargs)


@cache
def _connection_class(tls: bool) -> type:
    """redis-py's sync Sentinel connection, mended in two ways for the connections we hold
    and write to ourselves (the look-ahead's, docs/architecture.md#sentinel):

    - every socket it opens goes to the master the sentinels name now. redis-py asks them
      only in ``connect()``; a command sent on a dropped connection reconnects through
      ``connect_check_health``, straight to the address it had (after a failover: the
      old master; on a connection never opened: redis-py's default, localhost:6379);
    - a failed read drops it, as every other redis-py connection does: its
      ``read_response`` keeps the socket after a timeout or a broken read
      (``disconnect_on_error=False``), so the next command would read the last one's reply.
    """
    from redis.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

    base = SentinelManagedSSLConnection if tls else SentinelManagedConnection

    def _connect(self: Any) -> Any:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        return base._connect(self)

    def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("disconnect_on_error", True)
        return base.read_response(self, *args, **kwargs)

    return type(f"Following{base.__name__}", (base,), {"_connect": _connect, "read_response": read_response})


def master_async(url: str, options: dict[str, Any]) -> redis.asyncio.Redis:
    """The same on ``redis.asyncio`` (its connections reconnect through the sentinels and
    drop on a failed read as they are)."""
    from redis.asyncio.sentinel import Sentinel

    target = parse(url)
    kwargs, sentinel_kwargs = _keywords(target, options)
    return Sentinel(target.sentinels, sentinel_kwargs=sentinel_kwargs).master_for(target.service, **kwargs)
