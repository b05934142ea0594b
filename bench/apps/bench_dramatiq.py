"""Dramatiq's job module: Redis broker, default middleware (Retries included)."""

import os

import bench_body as body
import dramatiq
from dramatiq.brokers.redis import RedisBroker

dramatiq.set_broker(RedisBroker(url=os.environ["BENCH_REDIS_URL"]))


@dramatiq.actor
def noop(payload=""):
    body.noop(payload)


@dramatiq.actor
def truenoop(payload=""):
    body.truenoop(payload)


@dramatiq.actor
def cpu(iterations):
    body.cpu(iterations)


@dramatiq.actor
def probe(token, t_enqueued):
    body.probe(token, t_enqueued)


@dramatiq.actor
def slow(token, seconds):
    body.slow(token, seconds)


@dramatiq.actor
def io(seconds):
    body.io(seconds)
