"""``cogworker web``: serve the web UI (``cogworker.web``, the ``web`` extra) with uvicorn.
It binds 127.0.0.1 unless told otherwise, and refuses any other address without
authentication (COGWORKER_WEB_USERNAME/COGWORKER_WEB_PASSWORD) unless ``--insecure``."""

from __future__ import annotations

import argparse
import ipaddress
import os

from ..config import get_config
from ..launch.argtypes import port_arg
from .output import USAGE, CliError, usage

USER_ENV, PASSWORD_ENV = "COGWORKER_WEB_USERNAME", "COGWORKER_WEB_PASSWORD"


def add_parser(sub: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    web = sub.add_parser("web", parents=[parent], help="serve the web UI (needs the web extra)")
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    web.add_argument("--port", type=port_arg, default=8000, help="port (default 8000)")
    web.add_argument("--read-only", action="store_true", help="hide every action and refuse every POST")
    web.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        dest="allowed_hosts",
        metavar="NAME",
        help="a name the UI is reached by, besides --host, localhost, 127.0.0.1 and ::1 "
        "(repeatable; .example.com: it and its subdomains); any other Host header is refused",
    )
    web.add_argument(
        "--insecure", action="store_true", help=f"allow a non-loopback --host without {USER_ENV}/{PASSWORD_ENV} set"
    )


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def bound_names(host: str) -> list[str]:
    """--host as a name requests may give, unless it is every interface (0.0.0.0, ::)."""
    try:
        return [] if ipaddress.ip_address(host.strip("[]")).is_unspecified else [host]
    except ValueError:
        return [host]


def auth_from_env() -> tuple[str, str] | None:
    username, password = os.environ.get(USER_ENV, ""), os.environ.get(PASSWORD_ENV, "")
    if bool(username) != bool(password):
        raise usage(f"set both {USER_ENV} and {PASSWORD_ENV}, or neither")
    return (username, password) if username else None


def run(args: argparse.Namespace) -> int:
    credentials = auth_from_env()
    if credentials is None and not is_loopback(args.host) and not args.insecure:
        raise usage(
            f"refusing to serve on {args.host} without authentication: set {USER_ENV} and "
            f"{PASSWORD_ENV}, or bind 127.0.0.1, or pass --insecure"
        )
    try:
        import uvicorn

        from ..web import BasicAuth, create_app
    except ImportError as exc:
        raise CliError(f"the web UI needs its extra: pip install 'cogworker[web]' ({exc})", USAGE) from None
    config = get_config()
    config.redis().ping()  # unreachable: one line and exit 3, before the server starts
    auth = BasicAuth(*credentials) if credentials else None
    try:
        app = create_app(
            auth=auth,
            read_only=args.read_only,
            config=config,
            allowed_hosts=[*bound_names(args.host), *args.allowed_hosts],
        )
    except ValueError as exc:  # a bad --allowed-host or $COGWORKER_WEB_SECRET
        raise usage(str(exc)) from None
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", server_header=False)
    return 0
