"""cogworker's job module: the shared bodies under @cogworker.job (queue "default")."""
import os

import bench_body as body

import cogworker

cogworker.configure(redis_url=os.environ["BENCH_REDIS_URL"])


@cogworker.job
def noop(payload=""):
    body.noop(payload)


@cogworker.job
def cpu(iterations):
    body.cpu(iterations)


@cogworker.job
def probe(token, t_enqueued):
    body.probe(token, t_enqueued)


@cogworker.job
def slow(token, seconds):
    body.slow(token, seconds)
