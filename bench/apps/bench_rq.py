"""RQ's job module. Also passed to `rq worker -c bench_rq` as its settings module, so
each worker process imports it once at start and forked work horses inherit it
(RQ's documented way to preload: otherwise every horse would import it per job).
"""

import bench_body as body


def noop(payload=""):
    body.noop(payload)


def truenoop(payload=""):
    body.truenoop(payload)


def cpu(iterations):
    body.cpu(iterations)


def probe(token, t_enqueued):
    body.probe(token, t_enqueued)


def slow(token, seconds):
    body.slow(token, seconds)
