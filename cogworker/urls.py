"""Redis URLs: where they come from (the environment), the rules a URL must meet, and
how one is shown (``redact_url``: a password never reaches a message, a log line or a
process title). ``cogworker.config`` re-exports these names."""

from __future__ import annotations

import logging
import os
import re
from urllib.parse import parse_qs, urlparse

from .errors import ConfigurationError
from .store import sentinel
from .store.connection import url_problem
from .store.tls import without_tls_options

logger = logging.getLogger("cogworker")

DEFAULT_REDIS_URL = "redis://localhost:6379/0"


def redis_url_from_env() -> str:
    return os.environ.get("COGWORKER_REDIS_URL") or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


_QUERY_SECRET = re.compile(r"([?&](?:sentinel_)?password=)[^&#]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` fit for a message or a log line: the password (``redis://:***@host``,
    ``user:***@``; a bare ``secret@`` becomes ``***@``) and a ``?password=`` hidden.

    The user info is taken to run up to the *last* ``@``, as urlparse does: a password
    holding an unencoded ``@`` is still hidden whole (at worst, more is hidden)."""
    if not isinstance(url, str):
        return "<not a string>"
    scheme, sep, rest = url.partition("://")
    if not sep:  # no scheme: "user:pass@host" must not leak either
        scheme, rest = "", url
    at = rest.rfind("@")
    if at >= 0:
        user, colon, _ = rest[:at].partition(":")
        rest = (f"{user}:***" if colon else "***") + rest[at:]
    return scheme + sep + _QUERY_SECRET.sub(r"\1***", rest)


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")


def hide_urls(text: str) -> str:
    """``text`` with every URL in it redacted (argparse quotes a bad argument whole)."""
    return _URL_IN_TEXT.sub(lambda found: redact_url(found.group(0)), text)


def _secret_of(url: str) -> str:
    rest = url.partition("://")[2] or url
    userinfo = rest[: rest.rfind("@")] if "@" in rest else ""
    return userinfo.partition(":")[2] or ("" if ":" in userinfo else userinfo)


def _hidden(text: str, url: str) -> str:
    secret = _secret_of(url)
    return text.replace(secret, "***") if secret else text


def validate_redis_url(url: str) -> str:
    """Reject a URL redis-py would misread later, with a message that says why (and
    never shows the password)."""
    shown = redact_url(url)
    if isinstance(url, str) and sentinel.is_sentinel(url):
        try:
            sentinel.parse(url)
        except (sentinel.BadSentinelUrl, ValueError) as exc:
            raise ConfigurationError(f"invalid Sentinel URL {shown!r}: {_hidden(str(exc), url)}") from None
        return url
    try:
        parsed = urlparse(url)
        port = parsed.port  # raises ValueError on a non-numeric port
    except ValueError as exc:
        why, secret = str(exc), _secret_of(url)
        if secret:
            why = why.replace(secret, "***")  # urlparse may quote the netloc
        raise ConfigurationError(f"invalid Redis URL {shown!r}: {why}") from None
    if parsed.scheme not in ("redis", "rediss", "unix"):
        raise ConfigurationError(
            f"invalid Redis URL {shown!r}: scheme must be redis://, rediss://, unix://, "
            "redis+sentinel:// or rediss+sentinel://"
        )
    if parsed.scheme != "unix" and not parsed.hostname:
        raise ConfigurationError(f"invalid Redis URL {shown!r}: no host")
    if port is not None and not 0 < port < 65536:
        raise ConfigurationError(f"invalid Redis URL {shown!r}: port out of range")
    # redis-py reads a path that isn't a number (redis://host/abc) as db 0, silently. (The
    # URL itself stays out of this message: it may hold a password.)
    db = parsed.path[1:] if parsed.scheme != "unix" else ""
    dbs = [db] if db else []
    dbs += parse_qs(parsed.query).get("db", [])
    for value in dbs:
        if not value.isascii() or not value.isdigit():
            raise ConfigurationError(f"invalid Redis URL: the database must be a number, got {value!r}")
    # What redis-py itself would refuse only at the first connection, with a traceback from
    # inside it (an unknown ?name, a value it can't read): refused now, in one line.
    problem = url_problem(without_tls_options(url)[0])
    if problem is not None:
        raise ConfigurationError(f"invalid Redis URL {shown!r}: {_hidden(problem, url)}")
    return url


_tls_warned: set[str] = set()


def warn_tls_options(url: str) -> None:
    """TLS options on a plain URL are left out (store/tls.py): one warning per process says so."""
    clean, dropped = without_tls_options(url)
    if dropped and url not in _tls_warned:
        _tls_warned.add(url)
        logger.warning(
            "Redis URL %s isn't a TLS one: %s ignored (TLS options apply to rediss:// URLs only)",
            redact_url(clean),
            ", ".join(dropped),
        )
