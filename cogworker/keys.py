"""Every Redis key name cogworker uses (docs/architecture.md#redis-keys). Nothing else builds key strings."""

from __future__ import annotations

from collections.abc import Callable


class Keys:
    """Key names for one namespace.

    A namespace written as a Cluster hash tag (``{cogworker}``) keeps every key in one
    slot, so the multi-key Lua scripts stay valid on Redis Cluster.
    """

    def __init__(self, namespace: str = "cogworker") -> None:
        if not namespace or any(c.isspace() for c in namespace):
            raise ValueError(f"invalid namespace {namespace!r}: must be non-empty, without whitespace")
        self.namespace = namespace
        self._fleet(namespace)
        self._status(namespace)
        self._features(namespace)

    def _fleet(self, ns: str) -> None:
        """Queues, sets, processes and their liveness, cron: the first design's keys, mostly."""
        self.queue_prefix = f"{ns}:queue:"
        self.queues = f"{ns}:queues"
        # A capped stream that wakes idle workers of several queues (a key added to the old
        # design card's: docs/architecture.md#deviations).
        self.wake = f"{ns}:wake"
        # Identity -> number of its look-ahead fetch that took a job (added, as above).
        self.ahead = f"{ns}:ahead"
        self.schedule = f"{ns}:schedule"
        self.retry = f"{ns}:retry"
        self.dead = f"{ns}:dead"
        self.in_progress_prefix = f"{ns}:in_progress:"
        self.in_progress_identities = f"{ns}:in_progress_identities"
        self.processes = f"{ns}:processes"
        self.process_prefix = f"{ns}:process:"
        self.last_beat = f"{ns}:last_beat"
        self.workers_prefix = f"{ns}:workers:"
        # An addition to the key contract: a tombstone (TTL 7 days) left by whoever requeued
        # a process's list; every script that process runs refuses while it exists.
        self.fenced_prefix = f"{ns}:fenced:"
        self.orphanings_prefix = f"{ns}:orphanings:"
        self.repeat_orphans = f"{ns}:repeat_orphans"
        self.unsettled = f"{ns}:unsettled"
        self.stats_processed = f"{ns}:stats:processed"
        self.stats_failed = f"{ns}:stats:failed"
        self.unique_prefix = f"{ns}:unique:"
        # Addition: names of the queues an operator paused (api.Queue.pause); every fetch
        # script reads it, so a pause is fleet-wide.
        self.paused = f"{ns}:paused"
        self.periodic_prefix = f"{ns}:periodic:"
        self.periodic_schedule = f"{ns}:periodic:schedule"
        self.periodic_disabled = f"{ns}:periodic:disabled"
        # Addition (the queue layout on a cluster, docs/architecture.md#cluster-layout): the
        # names of the shards jobs were pushed to or worked from, in the fleet's slot.
        self.shards = f"{ns}:shards"

    def _status(self, ns: str) -> None:
        """What is kept about jobs: status, history, checkpoints, metrics."""
        # Additions: a job's status (a hash) and its executions (a capped list), per jid.
        self.status_prefix = f"{ns}:status:"
        self.history_prefix = f"{ns}:history:"
        self.checkpoint_prefix = f"{ns}:checkpoint:"  # an iterable job's cursor (docs/architecture.md#iterable)
        # Addition: per-UTC-hour buckets (hashes, jid -> a compact record) that hold the
        # common path's status and history instead of per-jid keys: enqueued jobs (queued)
        # and first-try successes (docs/architecture.md#status-buckets).
        self.enq_prefix = f"{ns}:enq:"
        self.done_prefix = f"{ns}:done:"
        # Addition: the finished jobs whose status and history are retained (zsets, jid ->
        # when it finished): the index the count and age bounds trim by, successes and
        # failures apart (docs/architecture.md#retention).
        self.done_ring = f"{ns}:done_ring"  # the done: buckets' names, newest first
        # Addition: bucket name -> records reserved in it (done_room.lua), so that racing
        # flushes never fill a bucket past its size; an entry goes with its bucket.
        self.done_fill = f"{ns}:done_fill"
        self.retained_succeeded = f"{ns}:retained:succeeded"
        self.retained_failed = f"{ns}:retained:failed"
        # The count bound of per-job keys written outside the status flush: each an index
        # of key names by last write, trimmed by the script that writes (_retain.lua).
        self.retained_progress = f"{ns}:retained:progress"
        self.retained_cancelled = f"{ns}:retained:cancelled"
        self.retained_checkpoints = f"{ns}:retained:checkpoints"
        self.retained_results = f"{ns}:retained:results"
        self.throughput_prefix = f"{ns}:throughput:"
        # Addition: per-minute counts of job durations per class in log-spaced buckets
        # (for api.class_metrics' p95); kept hours, not days: it has many more fields.
        self.durations_prefix = f"{ns}:durations:"
        # Addition: the same counts and buckets per UTC hour, kept 3 days: the web UI's
        # Metrics windows past an hour (8 h, 24 h, 72 h) read a few of these, not minutes.
        self.throughput_hour_prefix = f"{ns}:throughput_h:"
        self.durations_hour_prefix = f"{ns}:durations_h:"

    def _features(self, ns: str) -> None:
        """Operator control, workflows, rate limits, cancel and progress."""
        # Addition: an operator's request to a master or single-process worker ("quiet" or
        # "stop", api.quiet_process/stop_process), taken (GETDEL) on its heartbeat.
        self.control_prefix = f"{ns}:control:"
        # Additions (workflows, docs/architecture.md#workflows): a kept result, a group's
        # state, and the lists their waiters block on; each names its jid or gid as a
        # Cluster hash tag, so a group's keys share one slot. A script that touches one
        # is given it (declared by name, ``DECLARED`` below, when only Redis knows which).
        self.workflow_prefix = f"{ns}:"
        # Addition: fleet-wide rate limits (docs/architecture.md#limits): the limiters seen
        # (a sorted set, name -> last use), and per limiter its record (a hash), the slots
        # held (a sorted set), the starts in its window and the jobs parked waiting on it.
        self.limits = f"{ns}:limits"
        self.limits_over = f"{ns}:limits_over"  # jobs deferred over a limit, ever (a counter)
        self.limit_prefix = f"{ns}:limit:"
        self.limit_held_prefix = f"{ns}:limit_held:"
        self.limit_starts_prefix = f"{ns}:limit_starts:"
        self.limit_waiting_prefix = f"{ns}:limit_waiting:"
        # Additions (issue #27): a cancelled job's mark (JSON, TTL'd), read by the beat
        # that tells a running job and by its status; a running job's last progress
        # (JSON, TTL'd); the count of cancels.
        self.cancelled_prefix = f"{ns}:cancelled:"
        self.progress_prefix = f"{ns}:progress:"
        self.stats_cancelled = f"{ns}:stats:cancelled"
        # Addition: the workflows cancelled by id (a sorted set, id -> when), so their
        # marks (``cancelled:<id>``) stay bounded by count as well as by age.
        self.cancelled_workflows = f"{ns}:cancelled_workflows"
        # Additions (batches, docs/architecture.md#batches): the batches known (a sorted
        # set, bid -> created at; trimmed by count and age), batches created and batch
        # callbacks pushed, ever (counters); per batch its record and its jobs' states
        # (``batch``/``batch_jobs``, hashes named by the bid as a hash tag, as a group's).
        self.batches = f"{ns}:batches"
        self.stats_batches = f"{ns}:stats:batches"
        self.stats_batch_callbacks = f"{ns}:stats:batch_callbacks"
        # Addition (priorities, docs/architecture.md#priorities): the priority levels in use,
        # a set of level names (``level_name``); each level is a list of its own,
        # ``queue(level_name(queue, p))``, waiting beside its queue. Only added to (bounded
        # by 200 levels a queue): a worker reads it to know which lists its fetch names.
        self.levels = f"{ns}:levels"

    def queue(self, name: str) -> str:
        return self.queue_prefix + name

    def job_queue(self, name: str, priority: int) -> str:
        """The list a job of ``priority`` waits on: its queue at 0, else its level's."""
        return self.queue_prefix + (level_name(name, priority) if priority else name)

    def limit_keys(self, name: str) -> tuple[str, str, str, str]:
        """A limiter's record, held slots, window starts and waiting jobs."""
        return (
            self.limit_prefix + name,
            self.limit_held_prefix + name,
            self.limit_starts_prefix + name,
            self.limit_waiting_prefix + name,
        )

    def in_progress(self, identity: str) -> str:
        return self.in_progress_prefix + identity

    def process(self, identity: str) -> str:
        return self.process_prefix + identity

    def workers(self, identity: str) -> str:
        return self.workers_prefix + identity

    def control(self, identity: str) -> str:
        return self.control_prefix + identity

    def fenced(self, identity: str) -> str:
        return self.fenced_prefix + identity

    def orphanings(self, jid: str) -> str:
        return self.orphanings_prefix + jid

    def unique(self, digest: str) -> str:
        return self.unique_prefix + digest

    def cancelled(self, jid: str) -> str:
        return self.cancelled_prefix + jid

    def progress(self, jid: str) -> str:
        return self.progress_prefix + jid

    def status(self, jid: str) -> str:
        return self.status_prefix + jid

    def history(self, jid: str) -> str:
        return self.history_prefix + jid

    def checkpoint(self, jid: str) -> str:
        return self.checkpoint_prefix + jid

    def result(self, jid: str) -> str:
        """A kept result (a hash: status, value or the failure, expires_at)."""
        return f"{self.workflow_prefix}result:{{{jid}}}"

    def result_wait(self, jid: str) -> str:
        """The list a waiter for ``result(jid)`` blocks on (a wake token, TTL 300 s)."""
        return f"{self.workflow_prefix}result_wait:{{{jid}}}"

    def group(self, gid: str) -> str:
        """A group's (or chord's) state: n, left, r:<i> results, failed, the callback."""
        return f"{self.workflow_prefix}group:{{{gid}}}"

    def chord(self, cid: str) -> str:
        """A chord's id (its callback's jid) -> its group's id, so it can be cancelled by its id."""
        return f"{self.workflow_prefix}chord:{{{cid}}}"

    def group_wait(self, gid: str) -> str:
        return f"{self.workflow_prefix}group_wait:{{{gid}}}"

    def batch(self, bid: str) -> str:
        """A batch's record (a hash: counts, open, callbacks' templates, fired_at:<name>)."""
        return f"{self.workflow_prefix}batch:{{{bid}}}"

    def batch_jobs(self, bid: str) -> str:
        """A batch's jobs: jid -> pending | succeeded | dead | cancelled (a hash)."""
        return f"{self.workflow_prefix}batch_jobs:{{{bid}}}"

    def enq(self, hour: int) -> str:
        """Jobs enqueued in the UTC hour starting at epoch second ``hour`` (a hash)."""
        return f"{self.enq_prefix}{hour}"

    def done(self, hour: int, seq: int) -> str:
        """A bucket of first-try successes filed in the UTC hour starting at ``hour``, the
        ``seq``-th of the done ring (a hash; the one done_room.lua asks for as ``done:<hour>:<seq>``)."""
        return f"{self.done_prefix}{hour}:{seq}"

    def throughput(self, minute: int) -> str:
        """Per-minute processed/failed counts and ms per job class (a hash)."""
        return f"{self.throughput_prefix}{minute}"

    def durations(self, minute: int) -> str:
        """Per-minute duration buckets: ``<class>:<bucket>`` -> runs (a hash)."""
        return f"{self.durations_prefix}{minute}"

    def throughput_hour(self, hour: int) -> str:
        """Per-hour (``hour``: epoch seconds // 3600) counts and ms per job class (a hash)."""
        return f"{self.throughput_hour_prefix}{hour}"

    def durations_hour(self, hour: int) -> str:
        """Per-hour duration buckets: ``<class>:<bucket>`` -> runs (a hash)."""
        return f"{self.durations_hour_prefix}{hour}"

    def stats_day(self, kind: str, day: str) -> str:
        """Per-day totals (``kind``: processed or failed; ``day``: YYYY-MM-DD, UTC), kept ~35 days."""
        return f"{self.namespace}:stats:{kind}:{day}"

    def declared(self, name: str) -> str:
        """The key a declared name names (``<kind>:<data>``, the kind one of ``DECLARED``'s):
        a key named by data only Redis holds, which a script asks for by its reply
        ``{0, "need", name...}`` (transitions/_declared.lua, transitions/declare.py)."""
        kind, sep, data = name.partition(":")
        make = DECLARED.get(kind) if sep else None
        if make is None:
            raise ValueError(f"no key is named {name!r}")
        return make(self, data)

    def periodic_last_slot(self, pjid: str) -> str:
        return f"{self.periodic_prefix}last_slot:{pjid}"

    def periodic_lock(self, pjid: str, slot: int) -> str:
        return f"{self.periodic_prefix}lock:{pjid}:{slot}"

    def periodic_pushed(self, pjid: str, slot: int) -> str:
        """Addition: the jid a slot's job was pushed under, set by the push itself (TTL: the
        slot lock's), so a push whose reply was lost is never pushed again."""
        return f"{self.periodic_prefix}pushed:{pjid}:{slot}"

    def periodic_running(self, pjid: str) -> str:
        return f"{self.periodic_prefix}running:{pjid}"


def _done_of(keys: Keys, hour_seq: str) -> str:
    """``done(hour, seq)`` from ``"<hour>:<seq>"``."""
    hour, _, seq = hour_seq.partition(":")
    return keys.done(int(hour), int(seq))


def _enq_of(keys: Keys, hour: str) -> str:
    """``enq(hour)`` from its digits."""
    return keys.enq(int(hour))


def _itself(keys: Keys, key: str) -> str:
    """A key a record or an index holds by its full name (a batch callback's unique lock,
    a key retention sheds): the script checks it is one of its KEYS."""
    return key


# Every kind of declared name (``Keys.declared``) and what makes its key: the kind is the
# name of the method above that makes it (a queue's or level's list, a unique lock, a job's
# orphan counter, checkpoint, status, history, kept result and its wake token, cancel mark,
# a process's fence, a group's and a batch's keys, a done ring's bucket, an enq: bucket),
# or ``key`` for a key named in full. The one table of them (docs/internals/scripts.md#named-keys).
DECLARED: dict[str, Callable[[Keys, str], str]] = {
    "queue": Keys.queue,
    "unique": Keys.unique,
    "orphanings": Keys.orphanings,
    "checkpoint": Keys.checkpoint,
    "status": Keys.status,
    "history": Keys.history,
    "result": Keys.result,
    "result_wait": Keys.result_wait,
    "cancelled": Keys.cancelled,
    "fenced": Keys.fenced,
    "group": Keys.group,
    "group_wait": Keys.group_wait,
    "batch": Keys.batch,
    "batch_jobs": Keys.batch_jobs,
    "done": _done_of,
    "enq": _enq_of,
    "key": _itself,
}


# A priority level of a queue is named as the queue, a space, then the priority: a queue
# name has no whitespace (names.py), so no level name is ever a queue's. The fetch
# scripts strip the suffix to match a level against the paused names (_queues.lua).
LEVEL_SEP = " "


def level_name(queue: str, priority: int) -> str:
    return f"{queue}{LEVEL_SEP}{priority}"


def split_level(name: str) -> tuple[str, int]:
    """A level name's queue and priority; a queue's name and 0."""
    queue, sep, p = name.rpartition(LEVEL_SEP)
    if not sep:
        return name, 0
    try:
        return queue, int(p)
    except ValueError:
        return name, 0
