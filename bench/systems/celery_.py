"""Celery 5 with the prefork pool, in its default and its reliable configuration."""
from bench.systems import System


class Celery(System):
    lib = "celery"

    def __init__(self, mode):
        self.mode = mode
        self.name = f"celery-{mode}"
        self.config = {
            "default": "prefork -c N, defaults (ack on receipt, prefetch x4)",
            "reliable": "prefork -c N, acks_late, prefetch x1, reject_on_worker_lost",
        }[mode]

    # Both configurations differ only on the worker side (acks_late and friends are not in
    # the message), so they share one client and its prefilled snapshots.
    client_key = "celery"

    def worker_argvs(self, procs, bindir, python):
        return [[f"{bindir}/celery", "-A", "bench_celery", "worker", "-P", "prefork",
                 "-c", str(procs), "-l", "WARNING"]]

    def worker_env(self):
        return {"BENCH_CELERY_MODE": self.mode}

    def client(self):
        import bench_celery as app
        from celery import group

        class Client:
            def enqueue(self, fn, args):
                getattr(app, fn).delay(*args)

            def enqueue_many(self, fn, arglist):
                # Celery has no pipelined bulk enqueue; a group is its batch API.
                task = getattr(app, fn)
                group(task.s(*a) for a in arglist).apply_async()
        return Client()


SYSTEMS = [Celery("reliable"), Celery("default")]
