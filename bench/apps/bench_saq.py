"""SAQ's job module (asyncio): `saq bench_saq.settings --workers N` starts N worker
processes, each running up to `concurrency` jobs at once on its loop (SAQ's default: 10)."""

import os

import bench_body as body
from saq import Queue

queue = Queue.from_url(os.environ["BENCH_REDIS_URL"])


async def aio(ctx, *, seconds):
    await body.aio(seconds)


settings = {
    "queue": queue,
    "functions": [aio],
    "concurrency": int(os.environ.get("BENCH_SAQ_CONCURRENCY", "50")),
}
