"""The rows of the I/O workload (`python -m bench.iobound`): each system's way of waiting
on many slow calls at once, with N processes."""

from bench.systems import System
from bench.systems.celery_ import Celery
from bench.systems.cogworker_ import Cogworker
from bench.systems.dramatiq_ import Dramatiq


class CogworkerConcurrent(Cogworker):
    """cogworker-prefork --procs N --concurrency M: M async jobs per child on its loop."""

    def __init__(self, concurrency):
        self.concurrency = concurrency
        self.name = f"cogworker-c{concurrency}"
        self.config = f"cogworker-prefork --procs N --concurrency {concurrency} (async def job)"

    @property
    def client_key(self):
        return "cogworker"

    def worker_argvs(self, procs, bindir, python):
        return [
            [
                python,
                "-m",
                "cogworker.prefork.cli",
                "--procs",
                str(procs),
                "--concurrency",
                str(self.concurrency),
                "--redis-url",
                "$BENCH_REDIS_URL",
                "bench_cogworker",
            ]
        ]


class CeleryThreads(Celery):
    """N Celery workers (processes), each with the threads pool of M threads."""

    def __init__(self, threads):
        super().__init__("reliable", 1)
        self.threads = threads
        self.name = f"celery-threads{threads}"
        self.config = f"N x `celery worker -P threads -c {threads}`, acks_late, reject_on_worker_lost"

    def worker_argvs(self, procs, bindir, python):
        return [
            [
                f"{bindir}/celery",
                "-A",
                "bench_celery",
                "worker",
                "-P",
                "threads",
                "-c",
                str(self.threads),
                "-n",
                f"w{i}@%h",
                "-l",
                "WARNING",
            ]
            for i in range(procs)
        ]


class DramatiqThreads(Dramatiq):
    def __init__(self, threads):
        super().__init__()
        self.threads = threads
        self.name = f"dramatiq-t{threads}"
        self.config = f"--processes N --threads {threads}, Redis broker"

    def worker_argvs(self, procs, bindir, python):
        return [[f"{bindir}/dramatiq", "bench_dramatiq", "--processes", str(procs), "--threads", str(self.threads)]]


class Saq(System):
    """`saq bench_saq.settings --workers N`: N processes, M jobs at once each (asyncio)."""

    lib = "saq"

    def __init__(self, concurrency):
        self.concurrency = concurrency
        self.name = f"saq-{concurrency}"
        self.config = f"saq --workers N, concurrency={concurrency}"

    @property
    def client_key(self):
        return "saq"

    def worker_argvs(self, procs, bindir, python):
        return [[f"{bindir}/saq", "bench_saq.settings", "--workers", str(procs), "--quiet"]]

    def worker_env(self):
        return {"BENCH_SAQ_CONCURRENCY": str(self.concurrency)}

    def client(self):
        import asyncio

        import bench_saq as app

        class Client:
            def enqueue(self, fn, args):
                self.enqueue_many(fn, [args])

            def enqueue_many(self, fn, arglist):
                # SAQ jobs take keyword arguments; one enqueue call each (no bulk API).
                async def go():
                    await app.queue.connect()
                    for (seconds,) in arglist:
                        await app.queue.enqueue(fn, seconds=seconds)
                    await app.queue.disconnect()

                asyncio.run(go())

        return Client()


SYSTEMS = [CogworkerConcurrent(1), CogworkerConcurrent(50), CeleryThreads(50), DramatiqThreads(8), Saq(50)]
