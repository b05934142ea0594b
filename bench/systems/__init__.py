"""The systems under test, each behind the same small interface.

A System is used from two sides:
- by the orchestrator (any interpreter): `worker_argvs()` and `worker_env()` say how to
  start its workers with N processes; the orchestrator starts, kills and measures them.
- by the driver (`bench.driver`, run in the system's own interpreter): `client()`
  enqueues single jobs and, where the library has one, in bulk.

Whether a configuration survives SIGKILL is not declared here: the recovery workload
measures it.
"""

from abc import ABC, abstractmethod


class System(ABC):
    name = ""  # the row's name in the tables
    lib = ""  # the library (cogworker, celery, rq, dramatiq, huey, bare)
    config = ""  # one line: how it is configured
    interpreter = "peers"  # "peers" (bench/.venv-peers) or "project" (cogworker's own)

    @property
    def client_key(self):
        """Rows whose clients write the same bytes share prefilled snapshots."""
        return self.name

    @abstractmethod
    def worker_argvs(self, procs, bindir, python):
        """One argv per OS process to launch (most systems: one master that forks N)."""

    def worker_env(self):
        return {}

    @abstractmethod
    def client(self):
        """In the driver: an object with enqueue(fn, args) and enqueue_many(fn, list_of_args)
        (enqueue_many is None when the library has no bulk API)."""


def all_systems():
    from bench.systems import bare, celery_, cogworker_, dramatiq_, huey_, rq_

    return [*cogworker_.SYSTEMS, *bare.SYSTEMS, *celery_.SYSTEMS, *rq_.SYSTEMS, *dramatiq_.SYSTEMS, *huey_.SYSTEMS]


def io_systems():
    """The extra rows of the I/O workload (bench.iobound): concurrency inside a process."""
    from bench.systems import iobound_

    return list(iobound_.SYSTEMS)


def by_name(name):
    for s in [*all_systems(), *io_systems()]:
        if s.name == name:
            return s
    raise KeyError(name)
