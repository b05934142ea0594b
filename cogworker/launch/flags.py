"""What both worker commands (``cogworker-prefork`` and ``python -m cogworker.worker``)
share on their command line: one-line argument errors, ``--version``, the checks of
``--redis-url`` and ``--namespace``, and which queues to work when no ``-q`` is given."""

from __future__ import annotations

import argparse
from typing import NoReturn

from .. import store
from ..config import Config, hide_urls, logger, validate_namespace, validate_redis_url
from ..errors import ConfigurationError
from ..store.tls import certificate_hint
from .argtypes import port_arg, positive_int
from .queues import parse_queues


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (and exit 2), as every other error is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {hide_urls(message)} (see --help)\n")


def redis_url_arg(text: str) -> str:
    try:
        return validate_redis_url(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def namespace_arg(text: str) -> str:
    try:
        return validate_namespace(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_version(parser: argparse.ArgumentParser) -> None:
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


QUEUE_HELP = (
    "a queue to work, repeatable: strict order, or weighted with ,WEIGHT (default: every queue "
    "the module's jobs and periodic entries declare, plus default, with equal weights)"
)


def declared_queues() -> dict[str, list[str]]:
    """queue -> what declares it ("job app.jobs.add", "periodic entry report-5m"), for
    every job and periodic entry registered so far, in the order they were registered."""
    from ..core.registry import registry
    from ..cron.ticker import entries

    found: dict[str, list[str]] = {}
    for job in registry.values():
        found.setdefault(job.opts.queue, []).append(f"job {job.name}")
    for entry in entries.values():
        found.setdefault(entry.queue, []).append(f"periodic entry {entry.pjid}")
    return found


def app_queues(specs: list[str] | None) -> list[tuple[str, int | None]]:
    """The queues to work, after the app module was imported, and the boot log about them.

    ``-q`` given: those, and a warning for each job and periodic entry they leave out
    (its jobs would wait forever here). No ``-q``: ``default`` and every queue the app
    declares, each with weight 1 -- a random order per fetch, so no queue can starve
    another (the order of declaration is an accident of imports, not a priority).
    """
    declared = declared_queues()
    if specs:
        queues = parse_queues(specs)
        covered = {name for name, _ in queues}
        for queue, owners in declared.items():
            if queue not in covered:
                for owner in owners:
                    logger.warning(
                        "%s uses queue %r, which no -q covers: its jobs will wait for another worker", owner, queue
                    )
        return queues
    names = ["default", *(q for q in declared if q != "default")]
    if len(names) == 1:
        queues = [("default", None)]
    else:
        queues = [(name, 1) for name in names]
    logger.info("queues: %s (no -q: default and every queue the module declares, equal weights)", ",".join(names))
    return queues


def check_tls(config: Config) -> None:
    """For a rediss:// URL, one PING at boot: a certificate that can't be verified is a
    setting to change, not an outage to wait out (as a refused connection is), so it is
    a one-line error that says which setting. Any other failure is left to the usual
    outage handling."""
    if not config.redis_url.startswith(("rediss://", "rediss+sentinel://")):
        return
    try:
        config.redis().ping()
    except store.ConnectionError as exc:
        hint = certificate_hint(exc)
        if hint is not None:
            raise ConfigurationError(hint) from None
    except store.RedisError:
        return


# -- what both commands add for monitoring (docs/architecture.md#metrics, #logs) ------------------


def add_monitoring(parser: argparse.ArgumentParser) -> None:
    from . import logs as logsetup

    parser.add_argument(
        "--metrics-port",
        type=port_arg,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (needs cogworker[metrics])",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address /metrics listens on (default 127.0.0.1; 0.0.0.0 for every interface)",
    )
    parser.add_argument(
        "--metrics-max-classes",
        type=positive_int,
        default=500,
        metavar="N",
        help="distinct job_class labels kept; the rest are counted as 'other' (default 500)",
    )
    logsetup.add_arguments(parser)


def setup_logging(args: argparse.Namespace, process: str) -> None:
    """After the app module was imported: our logging unless the app set up its own.
    A bad $COGWORKER_LOG_LEVEL/FORMAT is a ConfigurationError (one line)."""
    from ..lifecycle import joblog
    from . import logs as logsetup

    logsetup.set_process(process)
    try:
        level, fmt = logsetup.chosen(args.log_level, args.log_format, getattr(args, "verbose", False))
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    logsetup.setup(level, fmt)
    joblog.enable()
