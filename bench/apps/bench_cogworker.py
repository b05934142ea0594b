"""cogworker's job module: the shared bodies under @cogworker.job (queue "default")."""

import os

import bench_body as body

import cogworker

cogworker.configure(redis_url=os.environ["BENCH_REDIS_URL"])


@cogworker.job
def noop(payload=""):
    body.noop(payload)


@cogworker.job
def truenoop(payload=""):
    body.truenoop(payload)


@cogworker.job
def cpu(iterations):
    body.cpu(iterations)


@cogworker.job
def probe(token, t_enqueued):
    body.probe(token, t_enqueued)


@cogworker.job
def slow(token, seconds):
    body.slow(token, seconds)


@cogworker.job(retry=0)
def fail(payload=""):
    """Counts itself, then raises: with retry=0 it is filed in the dead set at once
    (bench.costs measures the dead set's trimming with it)."""
    body.noop(payload)
    raise RuntimeError("bench: this job fails on purpose")


@cogworker.job
async def aio(seconds):
    await body.aio(seconds)


@cogworker.job
def io(seconds):
    body.io(seconds)
