"""``cogworker-prefork``: the command line (docs/architecture.md#contracts). User errors get one line and a
non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import NoReturn

from setproctitle import setproctitle

from ..errors import ConfigurationError

# Nothing here imports redis-py or the rest of cogworker: ``main`` first takes the
# password (--redis-url) out of the process title, then imports them.
from ..launch.argtypes import positive_float, positive_int
from ..launch.cpus import available_cpus
from .inbox import FORWARDED, BootInterrupted, SignalInbox
from .slots import MAX_SLOTS

PROG = "cogworker-prefork"
MAX_CONCURRENCY = 256  # jobs in flight per child: threads and shared memory grow with it


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        from ..config import hide_urls  # only on the way out: the title is set by then

        self.exit(2, f"{PROG}: error: {hide_urls(message)} (see --help)\n")


HEROKU_GRACE = 30.0  # seconds between Heroku's TERM and its SIGKILL


def default_procs() -> int:
    """``$COGWORKER_PROCS``, else the CPUs this process may run on, within its container's
    quota. Not ``$WEB_CONCURRENCY``: an app-wide setting (Heroku's buildpack sets it for the
    web server), which would tie the worker fleet's size to gunicorn's tuning."""
    env = os.environ.get("COGWORKER_PROCS")
    if env:
        try:
            return positive_int(env)
        except argparse.ArgumentTypeError as exc:
            raise ConfigurationError(f"COGWORKER_PROCS: {exc}") from None
    return available_cpus()


def warn_heroku(timeout: float) -> None:
    """On a Heroku dyno (``$DYNO``), a ``--timeout`` past Heroku's 30 s: one warning."""
    from ..config import logger

    if os.environ.get("DYNO") and timeout > HEROKU_GRACE:
        logger.warning(
            "--timeout %gs exceeds Heroku's %gs between TERM and SIGKILL (DYNO=%s): jobs still running then are "
            "killed, and run again after orphan recovery; use --timeout 25 or less",
            timeout,
            HEROKU_GRACE,
            os.environ["DYNO"],
        )


def build_parser() -> Parser:
    from ..launch.flags import QUEUE_HELP, add_monitoring, add_version, namespace_arg, redis_url_arg

    parser = Parser(prog=PROG, description="Run cogworker jobs in N forked, shared-nothing children.")
    add_version(parser)
    parser.add_argument("module", metavar="MODULE", help="the app module defining the jobs, e.g. app.jobs")
    parser.add_argument(
        "--procs",
        type=positive_int,
        help="children (default: $COGWORKER_PROCS, else the CPUs this process may use: "
        "its affinity, its container's CPU quota)",
    )
    parser.add_argument("-q", "--queue", action="append", dest="queues", metavar="QUEUE[,WEIGHT]", help=QUEUE_HELP)
    parser.add_argument(
        "--redis-url", type=redis_url_arg, help="default: $COGWORKER_REDIS_URL, $REDIS_URL, redis://localhost:6379/0"
    )
    parser.add_argument(
        "--timeout", type=positive_float, default=25.0, help="seconds a shutdown waits for running jobs (default 25)"
    )
    parser.add_argument(
        "--max-memory", type=positive_float, metavar="MB", help="replace a child (after its job) whose RSS passes this"
    )
    parser.add_argument("--max-jobs", type=positive_int, metavar="N", help="replace a child after N jobs")
    parser.add_argument(
        "--namespace", type=namespace_arg, help="Redis key prefix (default: $COGWORKER_NAMESPACE, else cogworker)"
    )
    parser.add_argument("--no-catch-up", action="store_true", help="periodic jobs: don't fire a slot missed while down")
    parser.add_argument(
        "--no-lookahead",
        action="store_true",
        help="fetch each job only when the last is done (for long, uneven jobs shared between hosts)",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        metavar="M",
        help="jobs each child runs at once: async jobs as tasks of its event loop, sync "
        "jobs in a thread pool of M (default 1: one at a time)",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="the same as --log-level DEBUG")
    add_monitoring(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    # First of all: the title overwrites argv, which may hold a password (--redis-url),
    # and the signal handlers make a TERM during the slow boot a clean stop.
    setproctitle(f"{PROG}: booting")
    inbox = SignalInbox()
    from ..launch.leave import Relaunch, leave, reexec

    relaunch = Relaunch.capture("cogworker.prefork.cli", argv)
    args = build_parser().parse_args(argv)
    setproctitle(f"cogworker: master {args.module} [booting]")
    from ..config import configure, get_config, logger, validate_redis_url
    from ..errors import RedisVersionError
    from ..launch.flags import app_queues, check_tls, setup_logging
    from ..launch.queues import parse_queues

    try:
        if args.redis_url:
            validate_redis_url(args.redis_url)
        queues = parse_queues(args.queues)
        procs = check_sizes(args.procs or default_procs(), args.concurrency)
        preload(args.module, inbox)
        setup_logging(args, "master")  # after the app: its own logging config, if any, is kept
        warn_heroku(args.timeout)
        queues = app_queues(args.queues)
        if args.redis_url or args.namespace:
            current = get_config()
            configure(redis_url=args.redis_url or current.redis_url, namespace=args.namespace or current.namespace)
        config = get_config()
        check_tls(config)
        from .master import Master, Settings
    except ConfigurationError as exc:
        if args.verbose and exc.__cause__ is not None:
            logger.exception("details")
        from ..launch.app import exit_code

        sys.stderr.write(f"{PROG}: {exc}\n")
        sys.exit(exit_code(exc))
    except BootInterrupted as exc:
        stopped_during_boot(str(exc))
    stop = inbox.stop_requested()
    if stop:
        stopped_during_boot(stop)
    settings = Settings(
        module=args.module,
        procs=procs,
        queues=queues,
        timeout=args.timeout,
        max_memory_mb=args.max_memory,
        max_jobs=args.max_jobs,
        catch_up=not args.no_catch_up,
        lookahead=not args.no_lookahead,
        concurrency=args.concurrency,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        metrics_max_classes=args.metrics_max_classes,
    )
    try:
        master = Master(settings, config, inbox)
        code = master.run()
    except (RedisVersionError, ConfigurationError) as exc:  # checked at boot, before any child is forked
        sys.exit(f"{PROG}: {exc}")
    if master.reloading:  # HUP: the children are gone, nothing is owed; the app anew, same pid
        # Blocked across exec (a mask survives it) until the new process has its handlers
        # (SignalInbox): a HUP or TERM meanwhile waits instead of killing the master.
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        reexec(relaunch)
    leave(code)  # the interpreter's teardown would only delay the exit (launch/leave.py)


def check_sizes(procs: int, concurrency: int) -> int:
    if procs > MAX_SLOTS:
        raise ConfigurationError(f"--procs {procs}: at most {MAX_SLOTS} children")
    if concurrency > MAX_CONCURRENCY:
        raise ConfigurationError(f"--concurrency {concurrency}: at most {MAX_CONCURRENCY} jobs per child")
    return procs


def preload(module: str, inbox: SignalInbox) -> None:
    """The app, once, in the master, before forking; a TERM meanwhile interrupts it."""
    from ..launch.app import import_app, require_jobs

    inbox.booting = True
    try:
        import_app(module)
    finally:
        inbox.booting = False
    require_jobs(module)


def stopped_during_boot(signal_name: str) -> NoReturn:
    from ..config import logger
    from ..launch import logs as logsetup

    if not logsetup.user_configured():  # interrupted before the logging was set up
        logsetup.setup("INFO", "text")
    logger.info("master: %s during boot: stopped before starting any child", signal_name)
    sys.exit(0)


if __name__ == "__main__":
    main()
