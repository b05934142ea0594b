"""How fast the web UI's pages render on big sets: 1,000,000 dead entries and 100,000 jobs
in one queue (plus 10,000 retries and 10,000 scheduled), in a Redis of its own. Each page
is requested over HTTP from the UI served by uvicorn in this process: the median and the
slowest of several requests, and the Redis time per request (SLOWLOG, every command
logged). Never asserted: the numbers are for the closing note.

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
    text = (f'{{"class":"app.jobs.Job{i % 7}","args":[{i},"{"x" * 40}"],"kwargs":{{}},"jid":"{uuid.uuid4().hex}",'
            f'"queue":"{queue}","retry":25,"created_at":{now},"enqueued_at":{now}')
    if failed:
        text += (f',"retry_count":3,"error_class":"{["ValueError", "KeyError"][i % 2]}","error_message":"boom {i}",'
                 f'"failed_at":{now},"error_traceback":"Traceback (most recent call last):\\n  ...\\nValueError"')
    return text + "}"


def fill(config: cogworker.Config, dead: int, queued: int) -> dict[str, str]:
    """Pipelined writes; returns jids to look up (the newest dead and its score, the next queued)."""
    r = config.redis()
    now = time.time()
    for key, n, failed in ((config.keys.dead, dead, True), (config.keys.retry, 10_000, True),
                           (config.keys.schedule, 10_000, False)):
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


def pages(jids: dict[str, str], dead: int, queued: int) -> list[str]:
    last_dead, last_queue = -(-dead // 25), -(-queued // 25)
    return ["/", "/stats.json", "/live.svg", "/busy", "/queues", "/queues/big", f"/queues/big?page={last_queue // 2}",
            f"/queues/big?page={last_queue}", "/scheduled", "/retries", "/dead", f"/dead?page={last_dead // 2}",
            f"/dead?page={last_dead}", "/periodic", "/metrics", "/unsettled",
            f"/job/{jids['dead']}?in=dead&at={jids['dead_at']}", f"/job/{jids['queued']}?in=queue:big&pos=0",
            f"/job/{jids['dead']}", f"/job/{jids['queued']}",
            "/dead?job_class=app.jobs.Job3", "/dead?error_class=KeyError&page=3"]


def measure(conn: http.client.HTTPConnection, r, path: str, runs: int) -> tuple[float, float, float, int]:
    times, redis_us = [], []
    for i in range(runs + 1):
        r.slowlog_reset()
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        took = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise SystemExit(f"{path}: HTTP {response.status}")
        log = r.slowlog_get(1_000_000)
        if i:  # the first is a warm-up (templates compiled, scripts loaded)
            times.append(took)
            redis_us.append(sum(e["duration"] for e in log if e["command"].split()[0] != b"SLOWLOG"))
    return statistics.median(times), max(times), statistics.median(redis_us), len(log)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dead", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    server = RedisServer().start()
    web = None
    try:
        config = cogworker.Config(redis_url=server.url)
        started = time.perf_counter()
        jids = fill(config, args.dead, args.queued)
        r = config.redis()
        print(f"filled {args.dead:,} dead, {args.queued:,} queued, 10,000 retries, 10,000 scheduled in "
              f"{time.perf_counter() - started:.1f} s; Redis {r.info('memory')['used_memory_human']}")
        web = ServerThread(create_app(config=config), free_port()).start()
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 1_000_000)
        conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=60)
        print("\n| page | median ms | slowest ms | Redis µs (median) | Redis commands |\n|---|---:|---:|---:|---:|")
        for path in pages(jids, args.dead, args.queued):
            median, slowest, redis_us, commands = measure(conn, r, path, args.runs)
            shown = path if len(path) < 70 else path[:67] + "..."
            print(f"| `{shown}` | {median:.1f} | {slowest:.1f} | {redis_us:,.0f} | {commands} |")
    finally:
        if web is not None:
            web.stop()
        server.cleanup()


if __name__ == "__main__":
    main()
