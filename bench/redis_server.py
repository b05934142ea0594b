"""A private, throw-away server on a free loopback port, for one measurement.

Every measurement gets its own: nothing is shared with the machine's Redis on 6379,
nothing is persisted, and no state (scripts, keys, client lists) leaks from one run
into the next. The server is the test fixtures' (`cogworker.testing.servers`): the same
binary (`redis-server` on PATH, else the embedded Valkey; `COGWORKER_TEST_SERVER` picks
another), started the same way; a bench adds a registry of live servers, so an
interrupted run stops them all, and a retry when a port is taken between its choice and
the server's bind.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from cogworker.testing.binaries import server_binary
from cogworker.testing.servers import RedisServer as FixtureServer
from cogworker.testing.servers import free_port

__all__ = ["LIVE", "RedisServer", "free_port", "redis_version", "stop_all"]

LIVE: set[RedisServer] = set()  # every server not yet stopped, so an interrupted run can stop them all


def redis_version() -> str:
    """The server's name and version, as the results record it (``Redis 7.0.15``)."""
    return server_binary().version


def stop_all() -> None:
    for server in list(LIVE):
        server.stop()


class RedisServer(FixtureServer):
    """The fixtures' server with room for a bench's connections; ``with RedisServer() as s``."""

    def __init__(self) -> None:
        super().__init__(args=("--maxclients", "1000"))

    def start(self, timeout: float = 5.0) -> RedisServer:
        for _ in range(5):  # a port can be taken between free_port() and the server's bind
            try:
                super().start(timeout)
            except RuntimeError:
                self.kill()
                shutil.rmtree(self.dir, ignore_errors=True)
                self.port, self.dir = free_port(), tempfile.mkdtemp(prefix="cogworker-redis-")
                continue
            LIVE.add(self)
            return self
        raise RuntimeError(f"could not start a private {self.server.version}")

    def stop(self) -> None:
        """Stopped, and its folder removed (a bench never restarts one)."""
        super().stop()
        LIVE.discard(self)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    with RedisServer() as r:
        print(r.url, os.getpid(), redis_version())
