"""``/metrics`` for the single-process runner (``python -m cogworker.worker --metrics-port``;
docs/architecture.md#metrics): the same families as the prefork master's, for its one
process. Served from a thread of its own: the runner never forks (the reason the
master has none), already runs its housekeeping on a thread, and its main thread is
inside a job or a blocking fetch most of the time. Redis is sampled at a scrape, at
most every few seconds, with a short timeout."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..config import Config
from ..metrics import jobcounts as jobmetrics
from ..metrics.exporter import Exporter, Processes, Sampler, listen, require_client
from ..metrics.http import serve_forever
from ..store.guard import Breaker

SOCKET_TIMEOUT = 1.0


class RunnerMetrics:
    def __init__(
        self,
        config: Config,
        queues: list[str],
        busy: Callable[[], bool],
        host: str,
        port: int,
        max_classes: int = jobmetrics.MAX_CLASSES,
    ) -> None:
        require_client()
        config = config.fleet.with_timeouts(SOCKET_TIMEOUT)  # the sampler finds each queue's part itself
        self.counts = jobmetrics.enable(max_classes)
        self.sampler = Sampler(config, queues, Breaker("metrics", config).step)
        self.exporter = Exporter(self.counts, self.sampler, lambda: Processes(1, int(busy())))
        self.server = listen(host, port, self.render)
        self.stopped = threading.Event()
        self.thread = threading.Thread(
            target=serve_forever, args=(self.server, self.stopped.is_set), name="cogworker-metrics", daemon=True
        )
        self.thread.start()

    def render(self) -> bytes:
        self.sampler.maybe_sample()
        return self.exporter.render()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=2)
        self.server.close()
