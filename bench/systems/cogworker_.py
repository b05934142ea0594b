"""cogworker: the prefork worker (master + N forked children), its only configuration,
which is the reliable one (in-progress list per child, requeued when the child dies)."""

from bench.systems import System


class Cogworker(System):
    name = "cogworker"
    lib = "cogworker"
    config = "cogworker-prefork --procs N (reliable fetch, per-child in-progress list)"
    interpreter = "project"

    def worker_argvs(self, procs, bindir, python):
        # `python -m` rather than the console script: works from a plain checkout too.
        return [
            [
                python,
                "-m",
                "cogworker.prefork.cli",
                "--procs",
                str(procs),
                "--redis-url",
                "$BENCH_REDIS_URL",
                "bench_cogworker",
            ]
        ]

    def client(self):
        import bench_cogworker as app

        class Client:
            def enqueue(self, fn, args):
                getattr(app, fn).enqueue(*args)

            def enqueue_many(self, fn, arglist):
                getattr(app, fn).enqueue_many([tuple(a) for a in arglist])

        return Client()


SYSTEMS = [Cogworker()]
