"""Dramatiq 2 with the Redis broker: --processes N --threads 1 (one job at a time per process)."""
from bench.systems import System


class Dramatiq(System):
    name = "dramatiq"
    lib = "dramatiq"
    config = "--processes N --threads 1, Redis broker (ack after run)"

    def worker_argvs(self, procs, bindir, python):
        return [[f"{bindir}/dramatiq", "bench_dramatiq", "--processes", str(procs), "--threads", "1"]]

    def client(self):
        import bench_dramatiq as app
        from dramatiq import group

        class Client:
            def enqueue(self, fn, args):
                getattr(app, fn).send(*args)

            def enqueue_many(self, fn, arglist):
                # No pipelined bulk enqueue in Dramatiq; a group is its batch API.
                actor = getattr(app, fn)
                group(actor.message(*a) for a in arglist).run()
        return Client()


SYSTEMS = [Dramatiq()]
