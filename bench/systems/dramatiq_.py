"""Dramatiq 2 with the Redis broker: --processes N --threads 1 (one job at a time per process)."""

from bench.systems import System


class Dramatiq(System):
    lib = "dramatiq"
    client_key = "dramatiq"  # prefetch is a worker setting: both rows share the snapshots

    def __init__(self, prefetch=None):
        self.prefetch = prefetch
        if prefetch is None:
            self.name, self.config = "dramatiq", "--processes N --threads 1, Redis broker (ack after run; prefetch 2)"
        else:
            self.name = f"dramatiq-p{prefetch}"
            self.config = f"--processes N --threads 1, Redis broker, dramatiq_queue_prefetch={prefetch}"

    def worker_env(self):
        # Dramatiq reads it at import: messages each worker process fetches ahead (its
        # default is 2 x threads). They sit in the process's ack set, requeued if it dies.
        return {"dramatiq_queue_prefetch": str(self.prefetch)} if self.prefetch else {}

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


SYSTEMS = [Dramatiq(), Dramatiq(16)]
