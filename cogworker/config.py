"""Settings, the environment, and the process's Redis client (opened by ``store.connection``).

Connections are per process: a forked child must never share its parent's sockets, so
the client is rebuilt whenever ``os.getpid()`` changes.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from dataclasses import dataclass, field, fields, replace
from typing import cast, overload

from . import layout
from .errors import ConfigurationError
from .keys import Keys
from .settings import (
    cluster_from_env,
    durability_from_env,
    import_prefixes_from_env,
    namespace_from_env,
    trust_everysec_from_env,
    validate_durability,
    validate_import_prefixes,
    validate_liveness,
    validate_namespace,
    validate_retention,
    validate_ttls,
    validate_wait,
    wait_replicas_from_env,
    wait_timeout_from_env,
)
from .store import Client, ResponseError, durability, forget_scripts
from .store import cluster as cluster_mode
from .store import errors as redis_errors
from .store.connection import connect, is_cluster
from .store.replication import Need
from .store.tls import without_tls_options
from .urls import (  # noqa: F401 (re-exported: cogworker.config's names)
    DEFAULT_REDIS_URL,
    hide_urls,
    redact_url,
    redis_url_from_env,
    validate_redis_url,
    warn_tls_options,
)

logger = logging.getLogger("cogworker")


# redis-py types every reply as ``bytes | str`` (a client may decode). Ours never do
# (``new_client`` sets no decode_responses: raw payloads must round-trip byte for byte), so
# replies are bytes; these narrow the type at the boundary, at no run-time cost.
def as_bytes(reply: bytes | str) -> bytes:
    return cast(bytes, reply)


def as_bytes_or_none(reply: bytes | str | None) -> bytes | None:
    return cast("bytes | None", reply)


def as_bytes_list(reply: list[bytes | str]) -> list[bytes]:
    return cast("list[bytes]", reply)


def as_text(reply: bytes | str) -> str:
    """A key name, a member or a field from a reply (bytes from our clients), as text."""
    return reply.decode() if isinstance(reply, bytes) else reply


# A number read from Redis (a counter, a record's field, a reply) is whatever was written
# there: a forged or damaged record can hold "1e999", "nan", "inf" or "x". Every face (the
# API, the command, the web UI, /metrics) parses such numbers with these two, so a bad
# value shows as unknown instead of an OverflowError or a ValueError on a page.
@overload
def number(reply: object) -> float | None: ...
@overload
def number(reply: object, default: float) -> float: ...
def number(reply: object, default: float | None = None) -> float | None:
    """A finite number from a reply or a field (bytes, text or a number), else ``default``."""
    if reply is None or isinstance(reply, bool):
        return default
    try:
        value = float(reply)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return default
    return value if math.isfinite(value) else default


@overload
def count(reply: object) -> int: ...
@overload
def count(reply: object, default: int) -> int: ...
@overload
def count(reply: object, default: None) -> int | None: ...
def count(reply: object, default: int | None = 0) -> int | None:
    """A whole number from a reply or a field (a fraction rounds down), else ``default``."""
    value = number(reply)
    return default if value is None else int(value)


@dataclass
class Config:
    # The Redis (redis://, rediss:// for TLS, redis+sentinel://); a cluster node's URL for Redis Cluster.
    redis_url: str = field(default_factory=redis_url_from_env)
    # The prefix of every key: apps sharing one Redis each use their own.
    namespace: str = field(default_factory=namespace_from_env)
    # A process is dead once another has watched its beat stay unchanged this long, with
    # Redis answering throughout; its list is then requeued and the process fenced.
    orphan_threshold: float = 60.0
    # A job whose process died under it more than this many times goes to dead (process_died).
    max_orphanings: int = 3
    # Seconds between two beats of each process (its liveness, and the operator's requests read back).
    heartbeat_interval: float = 5.0
    # How often orphan recovery looks (at most orphan_threshold / 4: it must watch often
    # enough to tell a stall from a death).
    recovery_interval: float = 15.0
    # Every call has one, so a hung Redis can't freeze a loop. Blocking fetches use a
    # shorter server-side timeout than this.
    socket_timeout: float = 5.0
    # Seconds to open a connection to Redis before the attempt counts as an outage.
    socket_connect_timeout: float = 2.0
    # The dead set keeps at most this many jobs, none older than dead_timeout seconds.
    dead_max_jobs: int = 10_000
    dead_timeout: float = 180 * 24 * 3600
    # Job status and history (lifecycle/history.py; docs/architecture.md#status-buckets): on by
    # default. The common path (queued, a first-try success) is one field of a bucket
    # (enq:<hour>; the done ring's done:<hour>:<seq>), no key per job; the rest writes status:<jid> (kept
    # status_ttl after its last change) and history:<jid> (the last history_max
    # executions, kept history_ttl after its last entry). Cost: 0.4-6% of no-op
    # throughput (bench/status_cost.py; figures in docs/guides/status.md), the 5% budget's range. With history off,
    # history:<jid> still gets the entries the attempts log (stats.attempts) needs, and
    # only those: each failed execution (went retrying or dead) and a success after failures.
    status: bool = True
    status_ttl: int = 24 * 3600
    history: bool = True
    history_max: int = 25
    history_ttl: int = 24 * 3600
    # Retention (docs/architecture.md#retention): the status and history of the last
    # status_max finished successes (up to 1.1 x: whole buckets) and status_max_failed dead
    # jobs are kept, each at most max(status_ttl, history_ttl); the rest is trimmed a bounded
    # amount per status flush. Measured (docs/operations/retention.md): about 260 bytes of Redis per retained
    # success, 3.8 KB per dead job with a 600-byte traceback (status, history and dead entry),
    # so the defaults hold about 2.6 MB + 38 MB at most.
    status_max: int = 10_000
    status_max_failed: int = 10_000
    # A failure's traceback, in its retry/dead entry, history and log line, is cut to this.
    traceback_lines: int = 30
    # A payload may only run a registered job (what the app module imported). These
    # module prefixes may also be imported on demand, for apps that import jobs lazily:
    # "app.tasks" allows app.tasks and app.tasks.*, not app.tasks2.
    import_prefixes: tuple[str, ...] = field(default_factory=import_prefixes_from_env)
    # OpenTelemetry spans per enqueue and execution (tracing.py): on once the `otel` extra
    # is installed and the app set a tracer provider; False turns them off.
    tracing: bool = True
    # Workflows (docs/architecture.md#workflows): a kept result lives result_ttl (a job's
    # own result_ttl overrides it); a group's state lives workflow_ttl while its members
    # run (a member settling after that finds it gone: logged), then its results' TTL.
    result_ttl: int = 3600
    workflow_ttl: int = 7 * 24 * 3600
    # Writes that survive a failover (docs/architecture.md#replication): each enqueue, and
    # each fetch, ack and filing, returns only once this many replicas hold it (Redis WAIT,
    # in the same round trip), or raises NotReplicated after wait_timeout seconds. 0: off.
    wait_replicas: int = field(default_factory=wait_replicas_from_env)
    wait_timeout: float = field(default_factory=wait_timeout_from_env)
    # Writes that survive a crash of Redis's host (docs/architecture.md#durable-mode): "aof"
    # makes each wait above a WAITAOF: an enqueue returns, and a job is started, acked or
    # filed, only once Redis fsynced it to its append-only file (NotFsynced after
    # wait_timeout). Checked at the first connect: refused on a server without WAITAOF,
    # without AOF, or with appendfsync everysec answering before its fsync (Valkey 9.1 does;
    # durability_trust_everysec=True accepts that, knowing up to ~1 s of writes can be lost).
    durability: str = field(default_factory=durability_from_env)
    durability_trust_everysec: bool = field(default_factory=trust_everysec_from_env)
    # Redis Cluster (docs/architecture.md#cluster): None asks the node at the first connect
    # (INFO cluster); True/False say it. In cluster mode the namespace is one hash tag.
    redis_cluster: bool | None = field(default_factory=cluster_from_env)
    # The key layout on a cluster (docs/architecture.md#cluster-layout): "namespace" (one
    # slot) or "queue" (a hash tag per shard: a queue, or a group of cluster_shards).
    cluster_layout: str = field(default_factory=layout.layout_from_env)
    cluster_shards: tuple[tuple[str, ...], ...] = field(default_factory=layout.shards_from_env)

    def __post_init__(self) -> None:
        validate_redis_url(self.redis_url)
        warn_tls_options(self.redis_url)
        validate_namespace(self.namespace)
        self.import_prefixes = validate_import_prefixes(self.import_prefixes)
        validate_liveness(self)
        validate_ttls(self)
        validate_wait(self)
        validate_durability(self)
        validate_retention(self)
        if self.redis_cluster not in (None, True, False):
            raise ConfigurationError(f"redis_cluster must be True, False or None, got {self.redis_cluster!r}")
        self.cluster_layout = layout.validate_layout(self.cluster_layout)
        self.cluster_shards = layout.validate_shards(self.cluster_shards)
        self._keys: Keys | None = None
        self._cluster: bool | None = None
        self._fleet: Config | None = None  # set on a shard's config: the config it belongs to
        self.shard_name: str | None = None  # a shard's config: its name
        self._shards: dict[str, Config] = {}
        self._noted: tuple[int, set[str]] = (0, set())  # shards named in the registry by this process
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._pid = 0
        self._unchecked = False  # durability="aof" not yet checked on this process's client

    @property
    def cluster(self) -> bool:
        """Whether this config runs on a Redis Cluster: said, or asked of the node once (a
        node that can't be reached then: plain; a cluster's MOVED then says so, store/errors.py)."""
        if self._cluster is None:
            found = is_cluster(self.client_url, self.socket_connect_timeout, self.redis_cluster)
            self._cluster = bool(found)
        return self._cluster

    @property
    def keys(self) -> Keys:
        """Every key name, under the namespace (in cluster mode: as one hash tag)."""
        if self._keys is not None:
            return self._keys
        cluster, namespace = self.cluster, self.namespace
        if cluster and not cluster_mode.has_tag(namespace):
            namespace = cluster_mode.tagged(namespace)
            logger.warning(
                "Redis Cluster: namespace %r is used as %r (one hash tag: every key of cogworker's in one slot)",
                self.namespace,
                namespace,
            )
        self._keys = Keys(namespace)
        return self._keys

    # -- the queue layout on a cluster (docs/architecture.md#cluster-layout) ---------------

    @property
    def sharded(self) -> bool:
        """Whether each queue's keys carry a hash tag of their own (layout "queue", on a cluster)."""
        return self.cluster_layout == "queue" and self.cluster

    @property
    def fleet(self) -> Config:
        """The config of the fleet's own keys: this one, unless this is a shard's."""
        return self._fleet or self

    def shard(self, queue: str) -> Config:
        """The config whose keys hold ``queue``'s jobs: its shard's, in the queue layout;
        else this one."""
        if not self.sharded:
            return self
        return self.shard_named(layout.shard_name(self.fleet.cluster_shards, queue))

    def shard_named(self, name: str) -> Config:
        if not self.sharded or name == self.shard_name:
            return self
        fleet = self.fleet
        namespace = layout.shard_namespace(fleet.keys.namespace, name)
        with fleet._lock:
            found = fleet._shards.get(name)
            if found is None:
                found = replace(fleet, namespace=namespace)
                found._fleet, found.shard_name, found._cluster = fleet, name, True
                fleet._shards[name] = found
        return found

    def with_timeouts(self, socket_timeout: float) -> Config:
        """This config with shorter socket (and connect) timeouts; a shard's stays that
        shard's (a plain ``dataclasses.replace`` would make it a fleet of its own)."""
        if self.shard_name is not None:
            return self.fleet.with_timeouts(socket_timeout).shard_named(self.shard_name)
        return replace(
            self, socket_timeout=socket_timeout, socket_connect_timeout=min(self.socket_connect_timeout, socket_timeout)
        )

    def note_shard(self) -> None:
        """Names this shard in the fleet's registry (``shards``), once per process: the
        faces find every shard there. Best effort: a failure is tried again next time."""
        if self.shard_name is None:
            return
        fleet = self.fleet
        pid, noted = fleet._noted
        if pid != os.getpid():
            noted = set()
            fleet._noted = (os.getpid(), noted)
        if self.shard_name not in noted:
            try:
                fleet.redis().sadd(fleet.keys.shards, self.shard_name)
            except ResponseError as exc:
                if redis_errors.is_outage(exc):
                    raise
                # A bad key (another type): never a reason to refuse a job or a worker.
                logger.error(
                    "Redis Cluster: the shard registry %s holds another type (%s): shard %r not listed "
                    "in it (the faces see the shards they find there and the declared ones)",
                    fleet.keys.shards,
                    exc,
                    self.shard_name,
                )
            noted.add(self.shard_name)

    def shards(self) -> list[Config]:
        """Every shard's config (the registry's and the declared groups'), by name; in the
        namespace layout, this config alone."""
        if not self.sharded:
            return [self]
        fleet = self.fleet
        try:
            names = {as_text(n) for n in fleet.redis().smembers(fleet.keys.shards)}
        except ResponseError as exc:
            if redis_errors.is_outage(exc):
                raise
            logger.error(
                "Redis Cluster: the shard registry %s holds another type (%s): reading the declared "
                "shards and this process's only",
                fleet.keys.shards,
                exc,
            )
            names = set(fleet._shards)
        names.update(group[0] for group in fleet.cluster_shards)
        return [fleet.shard_named(name) for name in sorted(names)]

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["redis_url"] = redact_url(self.redis_url)  # configs end up in logs and tracebacks
        return "Config(" + ", ".join(f"{name}={value!r}" for name, value in shown.items()) + ")"

    @property
    def client_url(self) -> str:
        """The URL the clients use: a plain one without TLS options (store/tls.py)."""
        return without_tls_options(self.redis_url)[0]

    def redis(self) -> Client:
        """This process's client (bytes in, bytes out: raw payloads must round-trip exactly).
        With ``durability="aof"``, checked before its first use (``require_durable``)."""
        pid = os.getpid()
        client = self._client
        if client is None or self._pid != pid:
            with self._lock:
                if self._client is None or self._pid != pid:
                    self._client = self.new_client()
                    self._pid = pid
                    self._unchecked = self.durability == "aof"
                client = self._client
        if self._unchecked:
            self._check_durable(client)
        return client

    def _check_durable(self, client: Client) -> None:
        """``require_durable``, until it has answered: Redis away now, asked again at the
        next use (the commands meanwhile meet the same outage); refused, raised at every use."""
        try:
            self.require_durable(client)
        except Exception as exc:
            if not redis_errors.is_outage(exc):
                raise
            return
        self._unchecked = False

    def require_durable(self, client: Client | None = None) -> None:
        """With ``durability="aof"``: refused in one line (``ConfigurationError``) where
        WAITAOF can't mean what it says (store/durability.py); asked once per process."""
        if self.durability == "aof":
            durability.require_aof(
                client or self.redis(),
                self.client_url,
                f"{self.keys.namespace}:durability-probe",
                self.durability_trust_everysec,
            )

    def new_client(self, socket_timeout: float | None = None) -> Client:
        return connect(
            self.client_url,
            socket_timeout or self.socket_timeout,
            self.socket_connect_timeout,
            self.replication_need,
            self.cluster,
            self.keys.namespace,
        )

    @property
    def replication_need(self) -> Need | None:
        """What each write must wait for (None: wait_replicas is 0, durability "none")."""
        aof = self.durability == "aof"
        return Need(self.wait_replicas, float(self.wait_timeout), aof) if self.wait_replicas or aof else None


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
        made = Config(**kwargs)
    forget_scripts()  # the scripts are kept per client: a new config means new clients
    cluster_mode.forget()  # and its URL's node is asked again whether it is a cluster's
    _refuse_if_not_durable(made)  # before it is set: a refused config leaves the current one
    with _config_lock:
        _config = made
    return _config


def _refuse_if_not_durable(config: Config) -> None:
    """``durability="aof"`` refused here, in one line, where it can't hold (Redis away now:
    asked at the first use instead, ``Config.redis``)."""
    if config.durability == "aof":
        config.redis()
