"""An app whose worker loop raises out of itself (a bug outside any job) once per child,
right after a job: the child dies with an exception, not a signal. Armed by PF_ESCAPE=1."""

import os

import cogworker
from cogworker.config import get_config
from cogworker.engine.loop import Worker

_original = Worker.settle


def _settle_then_blow_up(self, work, disposition, jid=None):
    _original(self, work, disposition, jid)
    if (
        get_config().redis().set(f"test:blown:{os.getpid()}", 1, nx=True)
        and get_config().redis().incr("test:blowups") <= 2
    ):
        raise RuntimeError("a bug outside the job")


if os.environ.get("PF_ESCAPE"):  # only in the master under test, never in the pytest process
    Worker.settle = _settle_then_blow_up


@cogworker.job
def record(tag):
    get_config().redis().rpush("test:ran", tag)
