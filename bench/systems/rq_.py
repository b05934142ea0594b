"""RQ 2: one job at a time per worker process, so N procs = N `rq worker` processes.

- rq-fork:   the default Worker, which forks a work horse per job.
- rq-simple: SimpleWorker, which runs jobs in the worker process itself.
Jobs are enqueued with Retry(max=3): with it, RQ requeues a job whose work horse died
(its reliable configuration); without it the job goes to the failed registry.
"""

from bench.systems import System


class RQ(System):
    lib = "rq"

    def __init__(self, kind):
        self.kind = kind
        self.name = f"rq-{kind}"
        self.config = {
            "fork": "N x `rq worker` (fork per job), Retry(max=3)",
            "simple": "N x `rq worker -w SimpleWorker`, Retry(max=3)",
        }[kind]

    client_key = "rq"  # the same client and jobs for both worker classes

    def worker_argvs(self, procs, bindir, python):
        argv = [
            f"{bindir}/rq",
            "worker",
            "-u",
            "$BENCH_REDIS_URL",
            "-c",
            "bench_rq",
            "--logging_level",
            "WARNING",
            "--disable-job-desc-logging",
        ]
        if self.kind == "simple":
            argv += ["-w", "rq.worker.SimpleWorker"]
        return [argv + ["default"] for _ in range(procs)]

    def client(self):
        import os

        import bench_rq as app
        from redis import Redis
        from rq import Queue, Retry

        q = Queue("default", connection=Redis.from_url(os.environ["BENCH_REDIS_URL"]))

        class Client:
            def enqueue(self, fn, args):
                q.enqueue(getattr(app, fn), *args, retry=Retry(max=3))

            def enqueue_many(self, fn, arglist):
                f = getattr(app, fn)
                q.enqueue_many([Queue.prepare_data(f, tuple(a), retry=Retry(max=3)) for a in arglist])

        return Client()


SYSTEMS = [RQ("fork"), RQ("simple")]
