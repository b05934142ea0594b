"""A private redis-server for tests: free port, own dir, can be stopped, paused
(SIGSTOP), resumed and restarted empty. Never touches any other Redis.

It is the one cogworker ships for its users' tests (``cogworker.testing.RedisServer``, the
pytest plugin's ``cogworker_redis_server``): the project's tests use the same."""

from __future__ import annotations

from cogworker.testing.servers import RedisServer, free_port

__all__ = ["RedisServer", "free_port"]
