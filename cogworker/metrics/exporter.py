"""What ``/metrics`` shows (docs/architecture.md#metrics): the job counts the processes
of this host made (``jobmetrics``), the process gauges their owner gives, and the Redis
side (queue sizes and latency, the scheduled/retry/dead sets), sampled every few
seconds in one pipeline. Rendered with ``prometheus-client`` (the ``metrics`` extra):
a registry with one collector, read at each scrape.

Shared by the prefork master (which adds its children's counts from their pipes) and
the single-process runner."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import routing, store
from ..boundedjson import loads as json_loads
from ..config import Config, count
from ..errors import ConfigurationError
from ..keys import Keys, split_level
from .http import MetricsServer
from .jobcounts import BUCKETS, JobMetrics

SAMPLE_INTERVAL = 5.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def require_client() -> None:
    """A one-line error at boot, not a traceback at the first scrape."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise ConfigurationError("--metrics-port needs prometheus-client: pip install 'cogworker[metrics]'") from None


def listen(
    host: str, port: int, render: Callable[[], bytes], forked: bool = False, prepare: Callable[[], None] | None = None
) -> MetricsServer:
    """The listening socket, bound now (at boot): a port in use is a one-line error."""
    try:
        return MetricsServer(host, port, render, forked, prepare)
    except OSError as exc:
        raise ConfigurationError(
            f"--metrics-port {port}: can't listen on {host}:{port}: {exc.strerror or exc}"
        ) from None


@dataclass
class Sample:
    """The Redis side, as last sampled. ``up``: the last sample went through."""

    queues: dict[str, tuple[int, float]] = field(default_factory=dict)  # queue -> (size, latency seconds)
    scheduled: int = 0
    retry: int = 0
    dead: int = 0
    up: bool = False
    outages: int = 0
    at: float = float("-inf")  # monotonic
    limit_deferrals: int = 0  # jobs parked over a rate limit, fleet-wide (docs/architecture.md#limits)
    cancelled: int = 0  # stats:cancelled: every api.cancel that won, fleet-wide
    batches: int = 0  # stats:batches: batches opened, fleet-wide (docs/architecture.md#batches)
    batch_callbacks: int = 0  # stats:batch_callbacks: batch callbacks pushed, fleet-wide


def sample_redis(config: Config, queues: list[str], client: Any = None) -> Sample:
    """Sizes and latencies in one pipeline: LLEN and the oldest entry of each queue,
    ZCARD of the three sets. Raises on a Redis error (the caller counts the outage).

    In the queue layout on a cluster (docs/architecture.md#cluster-layout): one pipeline
    per part (its queues among ``queues``, its sets and counters) and one on the fleet
    (``client``'s), summed: the sets' sizes and the counters are fleet-wide."""
    if not routing.split(config):
        return _sample_in(config, queues, client)
    fleet = config.fleet
    mine: dict[str, list[str]] = {}
    for queue in queues:
        mine.setdefault(routing.name_of(routing.holder(fleet, queue)) or "", []).append(queue)
    parts = {routing.name_of(part) or "": part for part in routing.all_parts(fleet)}
    parts.update({name: routing.named(fleet, name) for name in mine if name not in parts})
    total = _sample_in(fleet, [], client)
    for name, part in parts.items():
        _add(total, _sample_in(part, mine.get(name, [])))
    return total


def _add(total: Sample, more: Sample) -> None:
    total.queues.update(more.queues)
    total.scheduled += more.scheduled
    total.retry += more.retry
    total.dead += more.dead
    total.limit_deferrals += more.limit_deferrals
    total.cancelled += more.cancelled
    total.batches += more.batches
    total.batch_callbacks += more.batch_callbacks


def _sample_in(config: Config, queues: list[str], client: Any = None) -> Sample:
    """``sample_redis`` in one namespace (or one part): one pipeline, after the read of
    the priority levels in use (a queue's size and wait count its levels' jobs too)."""
    keys = config.keys
    client = client or config.redis()
    lists = _lists(client, keys, queues)
    pipe = store.pipeline(client)
    for queue in queues:
        for key in lists[queue]:
            pipe.llen(key)
            pipe.lindex(key, -1)  # the oldest: fetch takes from the right end
    for key in (keys.schedule, keys.retry, keys.dead):
        pipe.zcard(key)
    pipe.get(keys.limits_over)
    pipe.get(keys.stats_cancelled)
    pipe.get(keys.stats_batches)
    pipe.get(keys.stats_batch_callbacks)
    replies = pipe.execute()
    sample_counters = [_counter(replies.pop()) for _ in range(3)]
    deferrals = replies.pop()
    now = time.time()
    sample = Sample(up=True)
    i = 0
    for queue in queues:
        n = len(lists[queue])
        got = replies[2 * i : 2 * (i + n)]
        i += n
        sample.queues[queue] = (sum(int(size) for size in got[0::2]), max(_waited(old, now) for old in got[1::2]))
    sample.scheduled, sample.retry, sample.dead = (int(n) for n in replies[-3:])
    sample.limit_deferrals = count(deferrals)
    sample.batch_callbacks, sample.batches, sample.cancelled = sample_counters
    return sample


def _lists(client: Any, keys: Keys, queues: list[str]) -> dict[str, list[str]]:
    """Each queue's lists: its own and its priority levels' (none read when the levels
    key can't be: its own only)."""
    lists = {queue: [keys.queue(queue)] for queue in queues}
    try:
        members = client.smembers(keys.levels)
    except store.ResponseError:
        return lists
    for member in members:
        queue, p = split_level(member.decode() if isinstance(member, bytes) else str(member))
        if p and queue in lists:
            lists[queue].append(keys.job_queue(queue, p))
    return lists


def _counter(raw: Any) -> int:
    return count(raw)  # not a counter (someone else's key, a damaged one): 0, nothing to show


def _waited(raw: bytes | None, now: float) -> float:
    if raw is None:
        return 0.0
    try:
        enqueued = json_loads(raw).get("enqueued_at")
    except (ValueError, AttributeError):
        return 0.0  # an unreadable entry: its age is unknown, not an error of the scrape
    return max(0.0, now - float(enqueued)) if isinstance(enqueued, (int, float)) else 0.0


class Sampler:
    """Samples at most every ``interval`` seconds; ``sample_redis`` runs through ``step``
    (the master's circuit breaker, so an outage costs one short timeout)."""

    def __init__(
        self,
        config: Config,
        queues: list[str],
        step: Callable[..., tuple[bool, Any]],
        interval: float = SAMPLE_INTERVAL,
    ) -> None:
        self.config = config
        self.queues = queues
        self.step = step
        self.interval = interval
        self.last = Sample(up=True)  # until the first sample (made at once) says otherwise

    def due(self) -> float:
        """Seconds until the next sample."""
        return max(0.0, self.last.at + self.interval - time.monotonic())

    def maybe_sample(self, client: Any = None) -> None:
        if self.due() > 0:
            return
        ok, sample = self.step("sampling queue sizes", sample_redis, self.config, self.queues, client)
        outages = self.last.outages + (1 if self.last.up and not ok else 0)
        if ok:
            sample.outages = outages
            self.last = sample
        else:
            self.last = Sample(
                self.last.queues,
                self.last.scheduled,
                self.last.retry,
                self.last.dead,
                False,
                outages,
                limit_deferrals=self.last.limit_deferrals,
                cancelled=self.last.cancelled,
            )
        self.last.at = time.monotonic()


@dataclass
class Processes:
    """The process side, given by the owner at each scrape."""

    children: int = 0
    busy: int = 0
    exits: dict[str, int] = field(default_factory=dict)  # reason -> count


class Exporter:
    """The registry and its one collector; ``render()`` is one scrape's body."""

    def __init__(self, jobs: JobMetrics, sampler: Sampler, processes: Callable[[], Processes]) -> None:
        from prometheus_client import CollectorRegistry

        self.jobs = jobs
        self.sampler = sampler
        self.processes = processes
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # a collector: it has collect()

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def collect(self) -> Iterator[Any]:
        yield from job_families(self.jobs.copy())
        yield from redis_families(self.sampler.last)
        yield from process_families(self.processes())


def job_families(snap: dict[str, Any]) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

    jobs = CounterMetricFamily(
        "cogworker_jobs", "Job transitions made on this host, by outcome", labels=["queue", "job_class", "outcome"]
    )
    for labels, n in sorted(snap["counts"].items()):
        jobs.add_metric(list(labels), n)
    yield jobs
    durations = HistogramMetricFamily(
        "cogworker_job_duration_seconds", "Run time of jobs run on this host", labels=["queue", "job_class"]
    )
    for labels, counts in sorted(snap["durations"].items()):
        cumulative, buckets = 0.0, []
        for le, n in zip([*(repr(b) for b in BUCKETS), "+Inf"], counts[:-1], strict=True):
            cumulative += n
            buckets.append((le, cumulative))
        durations.add_metric(list(labels), buckets, counts[-1])
    yield durations
    fires = CounterMetricFamily("cogworker_periodic_fires", "Periodic slots this host fired", labels=["entry"])
    for entry, n in sorted(snap["fires"].items()):
        fires.add_metric([entry], n)
    yield fires
    yield CounterMetricFamily(
        "cogworker_orphans_requeued",
        "Jobs this host requeued from dead processes' lists",
        value=snap["orphans_requeued"],
    )


def redis_families(sample: Sample) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    size = GaugeMetricFamily("cogworker_queue_size", "Jobs waiting on the queue", labels=["queue"])
    latency = GaugeMetricFamily(
        "cogworker_queue_latency_seconds", "How long the oldest waiting job has waited", labels=["queue"]
    )
    for queue, (n, waited) in sorted(sample.queues.items()):
        size.add_metric([queue], n)
        latency.add_metric([queue], waited)
    yield size
    yield latency
    yield GaugeMetricFamily("cogworker_scheduled_size", "Jobs scheduled for later", value=sample.scheduled)
    yield GaugeMetricFamily("cogworker_retry_size", "Jobs waiting for a retry", value=sample.retry)
    yield GaugeMetricFamily("cogworker_dead_size", "Jobs in the dead set", value=sample.dead)
    yield CounterMetricFamily(
        "cogworker_limit_deferrals",
        "Jobs parked over a rate limit, fleet-wide (each time)",
        value=sample.limit_deferrals,
    )
    yield CounterMetricFamily(
        "cogworker_cancels", "Jobs cancelled (api.cancel that won), fleet-wide, from Redis", value=sample.cancelled
    )
    yield CounterMetricFamily(
        "cogworker_batches", "Batches created (cogworker.batch), fleet-wide, from Redis", value=sample.batches
    )
    yield CounterMetricFamily(
        "cogworker_batch_callbacks",
        "Batch callbacks fired (pushed), fleet-wide, from Redis",
        value=sample.batch_callbacks,
    )
    yield GaugeMetricFamily("cogworker_redis_up", "1 if the last sample reached Redis", value=int(sample.up))
    yield CounterMetricFamily("cogworker_redis_outages", "Times Redis became unreachable", value=sample.outages)


def process_families(procs: Processes) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    yield GaugeMetricFamily("cogworker_children", "Live worker processes", value=procs.children)
    yield GaugeMetricFamily("cogworker_children_busy", "Worker processes running a job", value=procs.busy)
    exits = CounterMetricFamily("cogworker_child_exits", "Children that left, by why", labels=["reason"])
    for reason, n in sorted(procs.exits.items()):
        exits.add_metric([reason], n)
    yield exits
