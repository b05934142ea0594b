"""``python -m cogworker.worker MODULE``: the whole system in one process, for development
and tests. The worker loop runs in the main thread; a housekeeping thread beats, polls
schedule/retry, recovers orphans and ticks cron."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading
from typing import Any

from setproctitle import setproctitle

from .. import routing, store
from ..config import configure, get_config, logger, redact_url, validate_redis_url
from ..core import current as current_job
from ..core import fate, heartbeat, hooks
from ..engine.effects import builtin_subscribers
from ..engine.loop import FENCED_EXIT, HardStop, Worker
from ..engine.reporter import Reporter
from ..errors import ConfigurationError, Fenced, RedisVersionError
from ..fleet.housekeeping import Housekeeping
from ..launch.app import exit_code, import_app, require_jobs
from ..launch.flags import (
    QUEUE_HELP,
    OneLineParser,
    add_monitoring,
    add_version,
    app_queues,
    check_tls,
    namespace_arg,
    redis_url_arg,
    setup_logging,
)
from ..launch.proctitle import hide_secrets
from ..launch.queues import parse_queues
from ..store.durability import warn_at_boot
from ..store.guard import Breaker
from ..store.server import warn_lacking


class RunnerReporter(Reporter):
    """Keeps the process title saying what the worker does, as a prefork child's does
    (``ps`` is the first tool an operator reaches for)."""

    def __init__(self, config: Any, module: str) -> None:
        super().__init__(config)
        self.prefix = f"cogworker: worker {module}"
        self.stopping = False

    def title(self, state: str) -> None:
        setproctitle(f"{self.prefix} {'stopping' if self.stopping else state}")

    def started(self, work: Any, payload: dict[str, Any]) -> None:
        self.title(f"busy {payload['class']} jid={payload['jid']}")

    def finished(self, work: Any, decision: fate.Decision) -> None:
        self.title("idle")


class Housekeeper(threading.Thread):
    """The housekeeping duties (``cogworker.fleet.housekeeping``) on a thread of their own, next
    to the worker loop in the main thread."""

    def __init__(self, worker: Worker, queues: list[str], cron: bool = True) -> None:
        super().__init__(name="cogworker-housekeeper", daemon=True)
        self.worker = worker
        self.config = worker.config
        self.fleet = worker.config.fleet  # cron, counters, an operator's requests (not its part)
        self.record = heartbeat.BeatRecord(worker.identity, "worker", 0, queues)
        # The worker loop logs an outage (once) and backs off itself; these duties each
        # retry on their own next turn, never skipped. One Redis, one outage log for the
        # process: the loop's (a queue layout's fleet is another Redis: its own).
        shared = worker.outage if self.fleet is self.config else None
        self.duties = Housekeeping(
            self.fleet,
            Breaker("housekeeping", self.fleet, skips=False, outage=shared),
            beat=self._beat,
            own=lambda: [worker.identity],
            cron=cron,
            parts=[self.config] if self.config is not self.fleet else None,
        )
        self.stopped = threading.Event()

    @property
    def ticker(self) -> Any:
        return self.duties.ticker

    def run(self) -> None:
        self.record.pid = os.getpid()
        while not self.stopped.is_set():
            self.duties.run_due()
            self.stopped.wait(max(0.01, min(0.5, self.duties.seconds_to_next())))

    def _beat(self) -> None:
        self.obey(heartbeat.take_control(self.fleet, self.worker.identity))
        self.record.busy = int(self.worker.busy)
        current = self.worker.current
        self.record.running = {"jid": current.jid(), "queue": current.queue} if current else None
        sent = heartbeat.clock()
        if self.fleet is not self.config:  # a record in the fleet's keys too: the one an operator's request checks
            heartbeat.beat(self.fleet, [dataclasses.replace(self.record, owns_list=False)])
        told = heartbeat.beat(self.config, [self.record])
        for jid in told.cancelled:  # an operator's cancel (api.cancel): the job polls current_job().cancelled
            current_job.tell_cancelled(jid)
        if told.refused:
            # Declared dead elsewhere: its jobs run there now; leave at once (a supervisor
            # restarts it under a new identity).
            self.worker.declare_fenced()
            os._exit(FENCED_EXIT)
        self.worker.fetcher.vouch(sent)

    def obey(self, command: str | None) -> None:
        """An operator's request read from Redis (api.quiet_process, api.stop_process): as
        a quiet, or as the first TERM (the running job finishes)."""
        if command == "quiet" and not self.worker.quieted:
            logger.info("worker %s: quiet requested through Redis (no new jobs)", self.worker.identity)
            self.worker.quiet()
            self.record.state = "quiet"
        elif command == "stop" and not self.worker.stopping:
            logger.info("worker %s: stop requested through Redis", self.worker.identity)
            self.record.state = "stopping"
            self.worker.stop()
            self.stop()

    def stop(self) -> None:
        self.stopped.set()


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    # `cogworker worker` (cogworker.cli) passes its own name; else `python -m cogworker.worker`.
    prog = prog or "python -m cogworker.worker"
    parser = OneLineParser(prog=prog, description="Run cogworker in one process (development, tests).")
    add_version(parser)
    parser.add_argument("module", help="the app module that defines the jobs, e.g. app.jobs")
    parser.add_argument("-q", "--queue", action="append", dest="queues", metavar="QUEUE[,WEIGHT]", help=QUEUE_HELP)
    parser.add_argument(
        "--redis-url", type=redis_url_arg, help="default: $COGWORKER_REDIS_URL, $REDIS_URL, redis://localhost:6379/0"
    )
    parser.add_argument(
        "--namespace", type=namespace_arg, help="Redis key prefix (default: $COGWORKER_NAMESPACE, else cogworker)"
    )
    parser.add_argument("--no-cron", action="store_true", help="don't run periodic jobs")
    parser.add_argument("--verbose", "-v", action="store_true", help="the same as --log-level DEBUG")
    add_monitoring(parser)
    return parser


def parse_args(argv: list[str] | None, prog: str | None = None) -> argparse.Namespace:
    return build_parser(prog).parse_args(argv)


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    if argv is None:  # `python -m cogworker.worker`: hide the password from `ps` first
        hide_secrets(prog or "python -m cogworker.worker")
    args = parse_args(argv, prog)
    try:
        queues, reporter, worker, keeper, exporter = boot(args)
    except ConfigurationError as exc:
        sys.stderr.write(f"cogworker: {exc}\n")
        sys.exit(exit_code(exc))
    signals = {"count": 0}

    def on_stop(signum: int, frame: Any) -> None:
        signals["count"] += 1
        reporter.stopping = True
        reporter.title("stopping")
        worker.stop()
        keeper.stop()
        if signals["count"] > 1 and worker.busy:
            raise HardStop()  # second signal: abandon the running job (it is handed back)

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    logger.info(
        "cogworker %s: worker %s on queues %s (Redis %s)",
        args.module,
        worker.identity,
        ",".join(q for q, _ in queues),
        redact_url(worker.config.redis_url),
    )
    keeper.start()
    reporter.title("idle")
    try:
        worker.run()
    except RedisVersionError as exc:
        sys.exit(f"cogworker: {exc}")
    finally:
        keeper.stop()
        keeper.join(timeout=5)
        if exporter is not None:
            exporter.stop()
        if not worker.fenced:
            clean_up(worker)
    if worker.fenced:
        sys.exit(FENCED_EXIT)  # the worker logged why, once
    logger.info("cogworker: stopped")


def boot(args: argparse.Namespace) -> tuple[list[tuple[str, int | None]], RunnerReporter, Worker, Housekeeper, Any]:
    """The app imported, the settings checked, and the parts made; ``ConfigurationError``
    for the user's one line."""
    if args.redis_url:
        validate_redis_url(args.redis_url)
    parse_queues(args.queues)  # a bad -q is told before the app's import, not after
    # What the jobs this process runs, files, requeues and buries do besides (the worker
    # loop and the housekeeping thread; engine/effects.py): before the app's own hooks.
    hooks.install(builtin_subscribers())
    import_app(args.module)
    require_jobs(args.module)
    setup_logging(args, "worker")  # after the app: its own logging config, if any, is kept
    queues = app_queues(args.queues)
    if args.redis_url or args.namespace:
        current = get_config()
        configure(redis_url=args.redis_url or current.redis_url, namespace=args.namespace or current.namespace)
    check_tls(get_config())  # a bad $REDIS_URL: this one line, not a traceback from Worker()
    warn_at_boot(get_config().redis(), "worker")  # settings that let Redis itself lose jobs
    warn_lacking(get_config().redis(), "worker")  # what of what cogworker uses this server lacks
    config = routing.worker_part(get_config(), queues)  # its queues' one part
    reporter = RunnerReporter(config, args.module)
    reporter.title("booting")
    # No siblings to hand a job fetched ahead to: no look-ahead.
    worker = Worker(queues, config=config, lookahead=False, reporter=reporter)
    keeper = Housekeeper(worker, [q for q, _ in queues], cron=not args.no_cron)
    return queues, reporter, worker, keeper, start_metrics(args, keeper, [q for q, _ in queues])


def clean_up(worker: Worker) -> None:
    try:
        # What is still listed was never started or only lacks its ack (dropped = acked);
        # an owed filing that couldn't be parked stays listed for orphan recovery.
        worker.requeue_rest()
        heartbeat.deregister(worker.config, worker.identity)
        if worker.config.fleet is not worker.config:  # its record in the fleet's keys (queue layout)
            heartbeat.deregister(worker.config.fleet, worker.identity)
    except Fenced:
        worker.declare_fenced()  # declared dead as it stopped: what it held runs elsewhere
    except store.RedisError as exc:
        logger.error("couldn't clean up on exit (orphan recovery will): %s", exc)


def start_metrics(args: argparse.Namespace, keeper: Housekeeper, queues: list[str]) -> Any:
    """``--metrics-port``: /metrics on a thread of its own (``runner_metrics``), or None."""
    if args.metrics_port is None:
        return None
    from .metrics import RunnerMetrics

    worker = keeper.worker
    return RunnerMetrics(
        worker.config, queues, lambda: worker.busy, args.metrics_host, args.metrics_port, args.metrics_max_classes
    )
