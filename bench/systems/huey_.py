"""Huey 3 with RedisHuey: huey_consumer -k process -w N."""

from bench.systems import System


class Huey(System):
    name = "huey"
    lib = "huey"
    config = "huey_consumer -k process -w N, RedisHuey (blocking fetch)"

    def worker_argvs(self, procs, bindir, python):
        return [[f"{bindir}/huey_consumer", "bench_huey.huey", "-k", "process", "-w", str(procs), "-q"]]

    def client(self):
        import bench_huey as app

        class Client:
            enqueue_many = None  # Huey has no bulk enqueue

            def enqueue(self, fn, args):
                getattr(app, fn)(*args)

        return Client()


SYSTEMS = [Huey()]
