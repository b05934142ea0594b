"""Celery's job module. BENCH_CELERY_MODE picks the configuration:

- default:  Celery's defaults (ack on receipt, prefetch multiplier 4).
- reliable: acks_late + reject_on_worker_lost, prefetch multiplier $BENCH_CELERY_PREFETCH
  (1 unless set). Celery's docs: with acks_late alone a task whose pool process is
  killed is still acknowledged (WorkerLostError); reject_on_worker_lost is what puts it
  back on the queue. Prefetched messages of a worker that is still alive stay reserved
  by it (unacked in Redis), so a larger multiplier keeps the guarantee.
"""

import os

import bench_body as body
from celery import Celery

app = Celery("bench_celery", broker=os.environ["BENCH_REDIS_URL"])
app.conf.broker_connection_retry_on_startup = True
app.conf.worker_hijack_root_logger = False
if os.environ.get("BENCH_CELERY_MODE") == "reliable":
    app.conf.task_acks_late = True
    app.conf.worker_prefetch_multiplier = int(os.environ.get("BENCH_CELERY_PREFETCH", "1"))
    app.conf.task_reject_on_worker_lost = True


@app.task
def noop(payload=""):
    body.noop(payload)


@app.task
def truenoop(payload=""):
    body.truenoop(payload)


@app.task
def cpu(iterations):
    body.cpu(iterations)


@app.task
def probe(token, t_enqueued):
    body.probe(token, t_enqueued)


@app.task
def slow(token, seconds):
    body.slow(token, seconds)


@app.task
def io(seconds):
    body.io(seconds)
