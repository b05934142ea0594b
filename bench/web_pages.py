"""How fast the web UI's pages render on big sets: 1,000,000 dead entries and 100,000 jobs
in one queue (plus 10,000 retries and 10,000 scheduled), against a baseline of small sets
(1,000 dead, 100 queued, 100 each), each in a Redis of its own and served by its own
uvicorn in this process. Each page is requested over HTTP, alternating small and big: the
median and slowest of several requests, the big/small ratio of the medians (O(page): about
1), and the Redis time per request (SLOWLOG, every command logged). Never asserted: the
numbers are for the closing note.

    .venv/bin/python -m bench.web_pages [--dead N] [--queued N] [--runs N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from redis_server import RedisServer, free_port  # noqa: E402
from web_harness import ServerThread  # noqa: E402

import cogworker  # noqa: E402
from cogworker.web import create_app  # noqa: E402

CHUNK = 10_000


def payload(i: int, queue: str = "big", failed: bool = True) -> str:
    """One job entry as the client writes it (formatted, not json.dumps: 1.1 M of them)."""
    now = time.time()
    text = (
        f'{{"class":"app.jobs.Job{i % 7}","args":[{i},"{"x" * 40}"],"kwargs":{{}},"jid":"{uuid.uuid4().hex}",'
        f'"queue":"{queue}","retry":25,"created_at":{now},"enqueued_at":{now}'
    )
    if failed:
        text += (
            f',"retry_count":3,"error_class":"{["ValueError", "KeyError"][i % 2]}","error_message":"boom {i}",'
            f'"failed_at":{now},"error_traceback":"Traceback (most recent call last):\\n  ...\\nValueError"'
        )
    return text + "}"


def fill(config: cogworker.Config, dead: int, queued: int) -> dict[str, str]:
    """Pipelined writes; returns jids to look up (the newest dead and its score, the next queued)."""
    r = config.redis()
    now = time.time()
    others = min(10_000, dead // 10)
    for key, n, failed in (
        (config.keys.dead, dead, True),
        (config.keys.retry, others, True),
        (config.keys.schedule, others, False),
    ):
        pipe = r.pipeline(transaction=False)
        for start in range(0, n, CHUNK):
            pipe.zadd(key, {payload(i, failed=failed): now - dead + i for i in range(start, min(n, start + CHUNK))})
            if len(pipe) >= 10:
                pipe.execute()
        pipe.execute()
    pipe = r.pipeline(transaction=False)
    for start in range(0, queued, CHUNK):
        batch = [payload(i, failed=False) for i in range(start, min(queued, start + CHUNK))]
        pipe.lpush(config.keys.queue("big"), *batch)
    pipe.sadd(config.keys.queues, "big")
    pipe.execute()

    def jid(raw: bytes) -> str:
        return str(json.loads(raw)["jid"])

    newest, score = r.zrange(config.keys.dead, -1, -1, withscores=True)[0]
    return {"dead": jid(newest), "dead_at": repr(float(score)), "queued": jid(r.lindex(config.keys.queue("big"), -1))}


def pages(jids: dict[str, str], dead: int, queued: int) -> list[tuple[str, str]]:
    """(label, path): the same pages on either site; middle and last pages are its own."""
    last_dead, last_queue = -(-dead // 25), -(-queued // 25)
    fixed = [
        "/",
        "/stats.json",
        "/live.svg",
        "/busy",
        "/queues",
        "/queues/big",
        "/scheduled",
        "/retries",
        "/dead",
        "/periodic",
        "/metrics",
        "/unsettled",
        "/dead?job_class=app.jobs.Job3",
        "/dead?error_class=KeyError&from=50000",
    ]
    return [(p, p) for p in fixed] + [
        ("/queues/big?page=(middle)", f"/queues/big?page={last_queue // 2}"),
        ("/queues/big?page=(last)", f"/queues/big?page={last_queue}"),
        ("/dead?page=(middle)", f"/dead?page={last_dead // 2}"),
        ("/dead?page=(last)", f"/dead?page={last_dead}"),
        ("/job/<newest dead>?in=dead&at=<score> (a list's link)", f"/job/{jids['dead']}?in=dead&at={jids['dead_at']}"),
        ("/job/<next queued>?in=queue:big&pos=0 (a list's link)", f"/job/{jids['queued']}?in=queue:big&pos=0"),
        ("/job/<newest dead> (search box, status off: a scan)", f"/job/{jids['dead']}"),
        ("/job/<next queued> (search box, status off: a scan)", f"/job/{jids['queued']}"),
    ]


class Site:
    """One Redis, filled, and the UI on it."""

    def __init__(self, dead: int, queued: int) -> None:
        self.server = RedisServer().start()
        self.config = cogworker.Config(redis_url=self.server.url)
        started = time.perf_counter()
        self.pages = dict(pages(fill(self.config, dead, queued), dead, queued))
        self.redis = self.config.redis()
        print(
            f"filled {dead:,} dead, {queued:,} queued, {min(10_000, dead // 10):,} retries and scheduled in "
            f"{time.perf_counter() - started:.1f} s; Redis {self.redis.info('memory')['used_memory_human']}"
        )
        self.redis.config_set("slowlog-log-slower-than", 0)
        self.redis.config_set("slowlog-max-len", 1_000_000)
        self.web = ServerThread(create_app(config=self.config), free_port()).start()
        self.times: list[float] = []
        self.redis_us: list[int] = []

    def get(self, path: str) -> None:
        self.redis.slowlog_reset()
        conn = http.client.HTTPConnection("127.0.0.1", self.web.port, timeout=120)  # uvicorn drops idle ones
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        self.times.append((time.perf_counter() - started) * 1000)
        conn.close()
        if response.status != 200:
            raise SystemExit(f"{path}: HTTP {response.status}")
        log = self.redis.slowlog_get(1_000_000)
        self.redis_us.append(sum(e["duration"] for e in log if e["command"].split()[0] != b"SLOWLOG"))

    def close(self) -> None:
        self.web.stop()
        self.server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dead", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    sites: list[Site] = []
    try:
        sites.append(Site(1_000, 100))
        sites.append(Site(args.dead, args.queued))
        small, big = sites
        print(
            "\n| page | small: median ms | big: median ms | big: slowest ms | big/small | big: Redis µs |\n"
            "|---|---:|---:|---:|---:|---:|"
        )
        for label in small.pages:
            for site in sites:
                site.get(site.pages[label])  # warm-up: templates compiled, scripts loaded
                site.times.clear()
                site.redis_us.clear()
            for _ in range(args.runs):  # alternating: the machine's load falls on both alike
                for site in sites:
                    site.get(site.pages[label])
            a, b = statistics.median(small.times), statistics.median(big.times)
            print(
                f"| `{label}` | {a:.1f} | {b:.1f} | {max(big.times):.1f} | {b / a:.2f} | "
                f"{statistics.median(big.redis_us):,.0f} |"
            )
    finally:
        for site in sites:
            site.close()


if __name__ == "__main__":
    main()
