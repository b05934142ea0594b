"""Huey's job module: RedisHuey with its defaults (blocking BRPOP fetch)."""

import os

import bench_body as body
from huey import RedisHuey

huey = RedisHuey("bench", url=os.environ["BENCH_REDIS_URL"])


@huey.task()
def noop(payload=""):
    body.noop(payload)


@huey.task()
def truenoop(payload=""):
    body.truenoop(payload)


@huey.task()
def cpu(iterations):
    body.cpu(iterations)


@huey.task()
def probe(token, t_enqueued):
    body.probe(token, t_enqueued)


@huey.task()
def slow(token, seconds):
    body.slow(token, seconds)
