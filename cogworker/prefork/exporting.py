"""The master's ``/metrics`` (docs/architecture.md#metrics): the whole host's numbers from
the one process that hears from every child, with no multiprocess directory and no
extra process. Served from the master's own selector loop (``metrics_http``): the
master stays single-threaded, and a scraper that never reads costs it nothing. Each
answer is rendered and sent by a forked renderer (``metrics_render``): never on the loop
that reaps children and requeues their jobs.

Children's job counts arrive gathered on their pipes (``("metrics", snapshot)``, with
their stats, at most once a second); the master's own transitions (hard-timed-out and
orphaned jobs, periodic fires) are counted in this process by the same hooks."""

from __future__ import annotations

import os
import selectors
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..metrics import jobcounts as jobmetrics
from ..metrics.exporter import Exporter, Processes, Sampler, listen, require_client


class MasterMetrics:
    def __init__(
        self,
        config: Config,
        queues: list[str],
        step: Callable[..., tuple[bool, Any]],
        processes: Callable[[], tuple[int, int]],
        host: str,
        port: int,
        max_classes: int = jobmetrics.MAX_CLASSES,
    ) -> None:
        require_client()
        self.totals = jobmetrics.JobMetrics(max_classes)
        jobmetrics.enable(max_classes)
        self.sampler = Sampler(config, queues, step)
        self.exits: dict[str, int] = {}
        self.processes = processes
        self.exporter = Exporter(self.totals, self.sampler, self._processes)
        # The master's own counts are merged here, on the loop, before each renderer is forked.
        self.server = listen(host, port, self.exporter.render, forked=True, prepare=self.drain)
        # Children are forked from this process: none of them may keep the port.
        os.register_at_fork(after_in_child=self.server.close_in_child)

    def attach(self, selector: selectors.BaseSelector) -> None:
        self.server.attach(selector)

    def drain(self) -> None:
        """The master's own counts into the totals."""
        own = jobmetrics.take()
        if own:
            self.totals.merge(own)

    def merge(self, snap: dict[str, Any]) -> None:
        self.totals.merge(snap)

    def child_left(self, reason: str) -> None:
        self.exits[reason] = self.exits.get(reason, 0) + 1

    def tick(self, client: Any = None) -> None:
        self.sampler.maybe_sample(client)
        self.server.sweep()

    def close(self) -> None:
        self.server.close()

    def _processes(self) -> Processes:
        children, busy = self.processes()
        return Processes(children, busy, dict(self.exits))
