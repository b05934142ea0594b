"""/metrics under long and many label values (issue #25, point 8): each label value is cut
at MAX_LABEL characters with a hash of the whole (two long names stay two series), the
(queue, class) pairs are capped, so the body stays a few MB; and the answer is rendered and
sent by a forked renderer, never on the master's loop: with 500 classes of 8,000
characters and two scrapers hammering, a SIGKILLed child's job runs again at once."""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
import time
import urllib.request

import psutil
import pytest
from metrics_util import scrape
from prefork_harness import lrange, wait_for
from redis_server import free_port

from cogworker.metrics import jobcounts as jobmetrics
from cogworker.metrics.jobcounts import MAX_LABEL, JobMetrics, label_value

pytest.importorskip("prometheus_client")


def test_a_long_label_value_is_cut_with_a_hash_of_the_whole():
    assert label_value("apps.jobs.send") == "apps.jobs.send"
    assert label_value("x" * MAX_LABEL) == "x" * MAX_LABEL
    a, b = "apps." + "a" * 8000 + ".one", "apps." + "a" * 8000 + ".two"
    cut_a, cut_b = label_value(a), label_value(b)
    assert len(cut_a) == len(cut_b) == MAX_LABEL and cut_a != cut_b
    assert cut_a.startswith("apps.aaa") and label_value(a) == cut_a  # the same name, the same label
    assert label_value(cut_a) == cut_a  # a label shipped by a child is left as it is by the master
    assert label_value("\udcff" * 500) != label_value("\udcfe" * 500)  # any str, even lone surrogates


def test_job_metrics_keep_neither_long_names_nor_unbounded_series():
    counts = JobMetrics(max_classes=500)
    for queue in ("default", "low", "q" * 5000):
        for i in range(600):
            counts.count(queue, f"apps.{i}." + "L" * 30_000, "dead", 0.01)
    snap = counts.copy()
    assert all(len(q) <= MAX_LABEL and len(c) <= MAX_LABEL for q, c, _ in snap["counts"])
    assert len(counts.cells) <= jobmetrics.CELLS_PER_CLASS * 500 + 1
    assert len({c for _, c, _ in snap["counts"]}) <= 501  # 500 classes and "other"
    assert sum(snap["counts"].values()) == 3 * 600  # nothing lost: past the caps it is "other"
    assert sum(len(c) for _, c in counts.alias) < 500 * 2 * MAX_LABEL  # no 30,000-character key kept
    master = JobMetrics(max_classes=500)
    master.merge(counts.delta())
    assert master.copy()["counts"] == snap["counts"]


def test_the_body_is_bounded():
    from prometheus_client.parser import text_string_to_metric_families

    from cogworker.metrics.exporter import Exporter, Processes, Sample

    counts = JobMetrics(max_classes=500)
    for queue in ("default", "low", "high"):
        for i in range(500):
            for outcome in ("succeeded", "retried", "dead"):
                counts.count(queue, f"apps.{i}." + "L" * 4000, outcome, 0.001 * i)

    class Sampled:
        last = Sample(up=True)

    body = Exporter(counts, Sampled(), lambda: Processes(1, 0)).render()  # type: ignore[arg-type]
    assert len(body) < 8_000_000, len(body)  # before: 500 x 4,000-character names made 50 MB
    families = list(text_string_to_metric_families(body.decode()))
    assert all(len(v) <= MAX_LABEL for f in families for s in f.samples for v in s.labels.values())


# -- a real master, 500 classes of 8,000 characters, two scrapers hammering ----------------------


def _unknown(name: str) -> str:
    return json.dumps(
        {
            "class": name,
            "args": [],
            "kwargs": {},
            "jid": secrets.token_hex(12),
            "queue": "default",
            "retry": 0,
            "created_at": time.time(),
            "enqueued_at": time.time(),
        }
    )


class Hammer(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.stop, self.ok, self.failed, self.largest = port, threading.Event(), 0, [], 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as answer:
                    self.largest = max(self.largest, len(answer.read()))
                self.ok += 1
            except OSError as exc:
                self.failed.append(repr(exc))


def test_sigkilled_childs_job_reruns_at_once_while_two_scrapers_hammer(own_config, masters):
    port = free_port()
    m = masters(procs=2, module="apps.obs_app", args=["--metrics-port", str(port)])
    m.wait_children()
    r = own_config.redis()
    names = [f"apps.obs_app.unknown{i:03d}" + "L" * 8000 for i in range(500)]
    r.lpush(own_config.keys.queue("default"), *[_unknown(n) for n in names])  # each: dead, counted under its name
    wait_for(lambda: r.zcard(own_config.keys.dead) == 500, 60, what="500 unknown classes counted")
    wait_for(
        lambda: len([k for k in scrape(port, timeout=30) if k[0] == "cogworker_jobs_total"]) >= 500,
        30,
        what="all of them exported",
    )
    hammers = [Hammer(port), Hammer(port)]
    for h in hammers:
        h.start()
    try:
        time.sleep(1.0)
        from apps import obs_app

        obs_app.hang.enqueue("victim")
        started = wait_for(
            lambda: [x for x in lrange(own_config, "test:started") if x.startswith("victim:")],
            what="the job's first run",
        )
        victim = int(started[0].split(":")[1])
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: len([x for x in lrange(own_config, "test:started") if x.startswith("victim:")]) == 2,
            10,
            interval=0.005,
            what="the job running again",
        )
        rerun = time.monotonic() - killed_at
    finally:
        for h in hammers:
            h.stop.set()
        for h in hammers:
            h.join(30)
    # A correctness bound with a margin for a loaded machine (the metrics guide's "within a second" is
    # measured by bench/metrics_rerun.py): before, every scrape blocked the loop for 0.45-2.8 s.
    assert rerun < 3.0, f"re-run {rerun:.2f}s after the kill"
    assert all(h.ok >= 1 and not h.failed for h in hammers), [(h.ok, h.failed[:3]) for h in hammers]
    assert max(h.largest for h in hammers) < 8_000_000  # before: 89 MB
    # The renderers are gone (reaped with the children): only the two workers are left.
    wait_for(lambda: len(psutil.Process(m.pid).children()) == 2, 10, what="the renderers reaped")
    assert all(p.status() != psutil.STATUS_ZOMBIE for p in psutil.Process(m.pid).children())
    m.signal(signal.SIGTERM)
    assert m.wait_exit(30) == 0
