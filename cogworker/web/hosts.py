"""Which ``Host`` a request may name, and whether a change comes from this UI's own pages.

DNS rebinding: a page on ``rebind.evil.example`` whose name then resolves to 127.0.0.1
talks to the UI as its own origin, so the browser lets it read pages and tokens; only
the ``Host`` header gives it away. Every request naming a host not on the list is refused
before routing (as Django's ``ALLOWED_HOSTS``).

Same origin: a page on another port of this host, or on a sibling subdomain, is
same-*site*, so SameSite=Strict cookies go along with its forms; the browser's
``Sec-Fetch-Site``, ``Origin`` and ``Referer`` say where a form really came from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_PORTS = {"http": "80", "https": "443"}


def split_host(value: str) -> tuple[str, str]:
    """A Host header (or the netloc of a URL) as (name, port): ``Example.COM:8000`` ->
    ``("example.com", "8000")``, ``[::1]:80`` -> ``("::1", "80")``; no port: ``""``."""
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    else:  # no port, or a bare IPv6 address (never valid in a Host header, refused below)
        host, port = value, ""
    return host.rstrip("."), port


class AllowedHosts:
    """The names a ``Host`` header may give: ``localhost``, ``127.0.0.1``, ``::1`` and the
    ones added (a name, an address; ``.example.com`` for it and every subdomain; ``*`` for
    any host, to leave the check to a proxy in front)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        if isinstance(extra, str):
            extra = [extra]  # one name given as a string, not its letters
        names: set[str] = set(DEFAULT_HOSTS)
        for given in extra:
            if not isinstance(given, str) or not given.strip() or any(c.isspace() or c in "/@," for c in given.strip()):
                raise ValueError(f"allowed host {given!r}: give a host name or address, such as ui.example.com")
            names.add(
                given.strip().lower() if given.strip() in ("*",) or given.startswith(".") else split_host(given)[0]
            )
        self.any = "*" in names
        self.names = frozenset(n for n in names if not n.startswith("."))
        self.suffixes = tuple(n for n in names if n.startswith(".") and len(n) > 1)

    def allows(self, header: str) -> bool:
        if self.any:  # "*": the check is off (an app in front already checked the Host)
            return True
        host, port = split_host(header)
        if not host or (port and not port.isdigit()) or (":" in host and not header.strip().startswith("[")):
            return False
        if host in self.names:
            return True
        return any(host.endswith(suffix) or host == suffix[1:] for suffix in self.suffixes)


def cross_origin(headers: Mapping[str, str]) -> str | None:
    """Why a state-changing request is not from this UI's own pages, or None.

    ``Sec-Fetch-Site`` (every current browser) says it outright; else ``Origin`` (sent with
    every form POST), else ``Referer``, must name the host the request was sent to. A
    request with none of them is not a browser's (curl, a script): the token still guards it."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"the browser says it came from a {site} page"
    host = headers.get("host", "")
    for name in ("origin", "referer"):
        value = headers.get(name)
        if value is not None:
            return None if same_origin(value, host) else f"its {name.title()} is not this UI's"
    return None


def same_origin(url: str, host_header: str) -> bool:
    """``url``'s host and port are the ``Host`` header's (each port defaulting to the
    url's scheme's): the scheme itself is not compared, as a TLS proxy in front changes it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme not in DEFAULT_PORTS or not parts.netloc:
        return False  # "null" (a sandboxed or file:// page), or garbage
    default = DEFAULT_PORTS[parts.scheme]
    url_host, url_port = split_host(parts.netloc.rpartition("@")[2])
    host, port = split_host(host_header)
    return bool(host) and (url_host, url_port or default) == (host, port or default)
