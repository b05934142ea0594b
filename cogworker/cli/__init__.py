"""The ``cogworker`` command (also ``python -m cogworker``): look at and operate the system
through ``cogworker.api``, and ``cogworker worker MODULE`` to run the single-process worker.

Every failure is one line on stderr and an exit code: 0 done, 1 not found, 2 usage,
3 Redis unreachable. Never a traceback, never a password (``config.redact_url``).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from .. import store
from ..config import configure, get_config, hide_urls, redact_url
from ..errors import BadPayload, BatchNotClosed, ConfigurationError, NotFound, WrongType
from ..launch.proctitle import hide_secrets
from ..store.tls import certificate_hint
from .output import NOT_FOUND, UNREACHABLE, USAGE, CliError, one_line
from .parser import build_parser, check

# The runner's options that take a value: skipped when looking for the first word of an
# old-style `cogworker [options] MODULE` command line.
_RUNNER_VALUE_OPTIONS = {"-q", "--queue", "--redis-url", "--namespace"}
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def subcommands() -> set[str]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def first_word(argv: list[str]) -> str | None:
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in _RUNNER_VALUE_OPTIONS
        else:
            return word
    return None


def main(argv: list[str] | None = None) -> None:
    if argv is None:  # a real command line: hide its password from `ps` first
        hide_secrets("cogworker")
    argv = hoisted(sys.argv[1:] if argv is None else list(argv))
    if argv and argv[0] == "worker":
        run_worker(argv[1:], "cogworker worker")
        return
    word = first_word(argv)
    if word is not None and word not in subcommands():
        unknown(word)
        # Until now `cogworker app.jobs` ran the worker: kept for a release, for a dotted
        # module path only (no command has a dot; a mistyped command must never start a worker).
        sys.stderr.write(
            f"cogworker: `cogworker {word}` is deprecated and will stop working in the next "
            f"release; use `cogworker worker {word}`\n"
        )
        run_worker(argv, "cogworker")
        return
    sys.exit(run(argv))


# What every subcommand takes (parser.common), also accepted before the subcommand's name:
# `cogworker --namespace x job J` is `cogworker job J --namespace x`.
_COMMON_VALUE_OPTIONS = {"--redis-url", "--namespace"}
_COMMON_FLAGS = {"--json"}


def hoisted(argv: list[str]) -> list[str]:
    """``argv`` with the common options given before the subcommand moved after its name;
    unchanged when anything else comes first (``--version``, the old form's ``-q``)."""
    leading: list[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        name = argv[i].split("=", 1)[0]
        if name in _COMMON_FLAGS or (name in _COMMON_VALUE_OPTIONS and "=" in argv[i]):
            leading.append(argv[i])
            i += 1
        elif name in _COMMON_VALUE_OPTIONS and i + 1 < len(argv):
            leading += argv[i : i + 2]
            i += 2
        else:
            return argv
    if not leading or i == len(argv) or argv[i] not in subcommands():
        return argv
    return [argv[i], *leading, *argv[i + 1 :]]


def unknown(word: str) -> None:
    """A word that is no subcommand: a usage error (exit 2), saying which it may have
    meant, unless it is a dotted module path (the old form of ``cogworker worker``)."""
    close = difflib.get_close_matches(word, sorted(subcommands()), n=3, cutoff=0.6)
    if close or "." not in word or not _MODULE.match(word):
        hint = f"did you mean {' or '.join(close)}?" if close else "see cogworker --help"
        shown = hide_urls(repr(word))  # a URL given in the wrong place keeps its password hidden
        sys.stderr.write(f"cogworker: error: unknown command {shown} ({hint}; a worker: cogworker worker MODULE)\n")
        sys.exit(USAGE)


def run_worker(argv: list[str], prog: str) -> None:
    from ..worker.runner import main as runner_main

    runner_main(argv, prog)


def run(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors: one line, exit 2 (OneLineParser)
    check(parser, args)
    try:
        setup(args)
        return dispatch(args)
    except CliError as exc:
        return fail(str(exc), exc.code)
    except ConfigurationError as exc:
        return fail(str(exc), USAGE)
    except (NotFound, WrongType, BadPayload) as exc:  # the API's: unknown name, key of the wrong type, raw entry
        return fail(str(exc), NOT_FOUND)
    except BatchNotClosed as exc:  # `batch BID --close` past its retry budget: the batch and what to do
        return fail(scrub(str(exc), get_config().redis_url), UNREACHABLE)
    except (store.ConnectionError, store.TimeoutError) as exc:
        url = get_config().redis_url
        hint = certificate_hint(exc)  # a setting to change: the worker commands' hint
        return fail(hint or f"Redis at {redact_url(url)} is unreachable: {scrub(str(exc), url)}", UNREACHABLE)
    except store.ResponseError as exc:
        if str(exc).startswith("WRONGTYPE"):
            return fail(f"a key holds the wrong type of value, nothing changed: {exc}", NOT_FOUND)
        return fail(f"Redis refused: {scrub(str(exc), get_config().redis_url)}", NOT_FOUND)
    except store.RedisError as exc:
        return fail(f"Redis error: {type(exc).__name__}: {scrub(str(exc), get_config().redis_url)}", UNREACHABLE)
    except BrokenPipeError:
        return 0  # `cogworker jobs dead | head`: the reader had enough
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as exc:  # a bug: still one line (the command's promise), its type says where to look
        return fail(f"unexpected error: {type(exc).__name__}: {scrub(str(exc), get_config().redis_url)}", 1)


def setup(args: argparse.Namespace) -> None:
    if args.redis_url or args.namespace:
        configure(redis_url=args.redis_url, namespace=args.namespace)
    else:
        get_config()  # a bad $REDIS_URL: a ConfigurationError here, one line


def dispatch(args: argparse.Namespace) -> int:
    handler = handlers()[args.command]
    return handler(args)


def handlers() -> dict[str, Callable[[argparse.Namespace], int]]:
    from . import batches, commands, health, limits, periodic, watch, web

    return {
        "periodic": periodic.run,
        "limits": limits.run,
        "batches": batches.list_batches,
        "batch": batches.show_batch,
        "web": web.run,
        "health": health.run,
        **commands.HANDLERS,
        "stats": watch.run,
    }


def fail(message: str, code: int) -> int:
    sys.stderr.write(f"cogworker: {one_line(message)}\n")
    return code


def scrub(message: str, url: str) -> str:
    """``message`` without the URL's password, in case a driver quoted it."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    for secret in {password, unquote(password or "")} - {None, ""}:
        message = message.replace(secret or "", "***")
    return message.replace(url, redact_url(url))
