"""Celery 5 with the prefork pool, in its default and its reliable configuration."""

from bench.systems import System


class Celery(System):
    lib = "celery"

    def __init__(self, mode, prefetch=None):
        self.mode, self.prefetch = mode, prefetch
        if mode == "default":
            self.name, self.config = "celery-default", "prefork -c N, defaults (ack on receipt, prefetch x4)"
        else:
            self.name = "celery-reliable" if prefetch == 1 else f"celery-reliable-p{prefetch}"
            self.config = f"prefork -c N, acks_late, reject_on_worker_lost, prefetch x{prefetch}"

    # Both configurations differ only on the worker side (acks_late and friends are not in
    # the message), so they share one client and its prefilled snapshots.
    client_key = "celery"

    def worker_argvs(self, procs, bindir, python):
        return [
            [f"{bindir}/celery", "-A", "bench_celery", "worker", "-P", "prefork", "-c", str(procs), "-l", "WARNING"]
        ]

    def worker_env(self):
        env = {"BENCH_CELERY_MODE": self.mode}
        if self.prefetch:
            env["BENCH_CELERY_PREFETCH"] = str(self.prefetch)
        return env

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


SYSTEMS = [Celery("reliable", 1), Celery("reliable", 16), Celery("default")]
