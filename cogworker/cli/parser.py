"""The ``cogworker`` command line: one parser, a subparser per subcommand.

argparse, not click: no new dependency, and the project's other commands
(``cogworker-prefork``, the runner) are argparse with the same one-line errors
(``commandline.OneLineParser``) and the same ``--redis-url``/``--namespace`` checks."""

from __future__ import annotations

import argparse

from ..launch.argtypes import positive_float, positive_int
from ..launch.flags import OneLineParser, add_version, namespace_arg, redis_url_arg
from . import batches, health, results, web

SETS = ("retry", "dead", "scheduled")
DEFAULT_LIMIT = 25
WATCH_EVERY = 2.0  # seconds between two rounds of `stats --watch`, as the web dashboard polls


def common() -> OneLineParser:
    """What every subcommand takes."""
    parent = OneLineParser(add_help=False)
    parent.add_argument(
        "--redis-url", type=redis_url_arg, help="default: $COGWORKER_REDIS_URL, $REDIS_URL, redis://localhost:6379/0"
    )
    parent.add_argument(
        "--namespace", type=namespace_arg, help="Redis key prefix (default: $COGWORKER_NAMESPACE, else cogworker)"
    )
    parent.add_argument("--json", action="store_true", help="one JSON document on stdout, for scripts")
    return parent


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="cogworker",
        description="Look at and operate a cogworker system.",
        epilog="cogworker worker MODULE runs the single-process worker (cogworker worker --help for its options).",
    )
    add_version(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    parent = [common()]

    stats = sub.add_parser("stats", parents=parent, help="counters, sets, queues, latency, processes (one screen)")
    stats.add_argument(
        "--watch",
        nargs="?",
        type=positive_float,
        const=WATCH_EVERY,
        metavar="SECONDS",
        help=f"redraw every SECONDS (default {WATCH_EVERY:g}) until Ctrl-C; "
        "one line per round when stdout is not a terminal",
    )
    sub.add_parser("queues", parents=parent, help="every known queue: size, latency, paused")
    queue = sub.add_parser(
        "queue",
        parents=parent,
        usage="cogworker queue [pause|resume] NAME [--limit N]",
        help="a queue's jobs (the next to run first); pause|resume NAME: fleet-wide",
    )
    queue.add_argument("words", nargs="+", metavar="[pause|resume] NAME")
    queue.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"list at most N jobs (default {DEFAULT_LIMIT})",
    )
    clear = sub.add_parser("clear", parents=parent, help="delete every job of a queue (asks first)")
    clear.add_argument("name", metavar="QUEUE")
    clear.add_argument("--yes", "-y", action="store_true", help="don't ask for confirmation")

    _add_set_commands(sub, parent)

    procs = sub.add_parser(
        "processes",
        parents=parent,
        help="live processes: what each runs, since when, RSS; quiet|stop IDENTITY of a master",
    )
    procs.add_argument(
        "action",
        nargs="?",
        choices=("quiet", "stop"),
        help="ask a master (or single-process worker) to go quiet or stop, through Redis",
    )
    procs.add_argument("identity", nargs="?", metavar="IDENTITY")

    periodic = sub.add_parser("periodic", parents=parent, help="periodic entries: list, disable, enable, run-now")
    periodic.add_argument("action", choices=("list", "disable", "enable", "run-now"))
    periodic.add_argument("name", nargs="?", metavar="NAME", help="the entry's name (pjid)")

    sub.add_parser("limits", parents=parent, help="rate limiters: kind, limit, in use, waiting, over-limit count")
    batches.add_parser(sub, parent)

    server = OneLineParser(add_help=False)
    server.add_argument(
        "--redis-url", type=redis_url_arg, help="default: $COGWORKER_REDIS_URL, $REDIS_URL, redis://localhost:6379/0"
    )
    server.add_argument(
        "--namespace", type=namespace_arg, help="Redis key prefix (default: $COGWORKER_NAMESPACE, else cogworker)"
    )
    web.add_parser(sub, server)
    health.add_parser(sub, parent)

    # Listed for --help only: main() hands `worker ...` to the runner's own parser.
    sub.add_parser("worker", help="run the single-process worker: cogworker worker MODULE [options]", add_help=False)
    return parser


def _add_set_commands(sub: argparse._SubParsersAction, parent: list[OneLineParser]) -> None:
    """``jobs``, ``job``, ``retry`` and ``delete``: the retry, dead and scheduled sets."""
    jobs = sub.add_parser("jobs", parents=parent, help="list the entries of retry, dead or scheduled")
    jobs.add_argument("set", choices=SETS)
    jobs.add_argument("--class", dest="job_class", metavar="C", help="only this job class")
    jobs.add_argument("--error", dest="error_class", metavar="E", help="only this error class")
    jobs.add_argument("--queue", metavar="Q", help="only this queue")
    jobs.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"at most N entries (default {DEFAULT_LIMIT})",
    )

    job = sub.add_parser("job", parents=parent, help="where a job is, its payload, status, history, traceback")
    job.add_argument("jid", metavar="JID")
    results.add_parser(sub, parent)

    cancel = sub.add_parser(
        "cancel", parents=parent, help="cancel jobs: a waiting one is removed, a running one told (it ends cancelled)"
    )
    cancel.add_argument("jids", nargs="+", metavar="JID")

    for name, what in (("retry", "enqueue entries now, on their queues"), ("delete", "delete entries")):
        bulk = sub.add_parser(name, parents=parent, help=f"{what}: JID... or --all --from SET")
        bulk.add_argument("jids", nargs="*", metavar="JID")
        bulk.add_argument("--all", action="store_true", help="every entry of --from (or of --class there)")
        bulk.add_argument("--from", dest="source", choices=SETS, help="the set to take them from")
        bulk.add_argument("--class", dest="job_class", metavar="C", help="with --all: only this job class")
        bulk.add_argument("--yes", "-y", action="store_true", help="don't ask for confirmation")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The combinations argparse can't express; a bad one is a usage error (exit 2)."""
    if args.command in ("retry", "delete"):
        if args.all and args.jids:
            parser.error(f"{args.command}: give JIDs or --all, not both")
        if not args.all and not args.jids:
            parser.error(f"{args.command}: give one or more JIDs, or --all --from SET")
        if args.all and not args.source:
            parser.error(f"{args.command} --all needs --from {'|'.join(SETS)}")
        if args.job_class and not args.all:
            parser.error(f"{args.command}: --class goes with --all")
    if args.command == "queue":
        _queue_words(parser, args)
    if args.command == "processes" and args.action and not args.identity:
        parser.error(f"processes {args.action} needs the IDENTITY of a master or single-process worker")
    if args.command == "periodic" and args.action != "list" and not args.name:
        parser.error(f"periodic {args.action} needs the entry's NAME")


def _queue_words(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``queue NAME`` lists; ``queue pause|resume NAME`` changes (as before)."""
    words = args.words
    if words in (["pause"], ["resume"]):
        parser.error(f"queue {words[0]} needs the queue's NAME")
    if len(words) == 1:
        args.action, args.name = None, words[0]
    elif len(words) == 2 and words[0] in ("pause", "resume"):
        args.action, args.name = words
    else:
        parser.error(f"queue: give NAME (its jobs) or pause|resume NAME, not {' '.join(words)!r}")
