"""The ceiling: the bare Redis protocol cogworker's hot path needs, and nothing else.

N plain processes (no master, no heartbeat, no stats) loop over fetch -> run the same
job body -> ack. See bench/bare.py for the variants.
"""

from bench.systems import System

QUEUE = "bare:queue"


class Bare(System):
    lib = "bare"

    def __init__(self, variant):
        self.variant = variant
        self.name = f"bare-{variant}"
        self.config = {
            "2rt": "BLMOVE queue -> in-progress, run, LREM: 2 round trips/job",
            "lua": "one script: LREM previous + LMOVE next (ack rides on the fetch)",
            "ahead": "the lua script sent before the job runs, read after (look-ahead, as cogworker)",
            "batch8": "pipeline: LREM the previous batch + LMOVE x8",
            "batch32": "pipeline: LREM the previous batch + LMOVE x32",
        }[variant]

    def worker_argvs(self, procs, bindir, python):
        return [[python, "-m", "bench.bare", "--variant", self.variant, "--index", str(i)] for i in range(procs)]

    def client(self):
        import json
        import os

        from redis import Redis

        r = Redis.from_url(os.environ["BENCH_REDIS_URL"])

        class Client:
            def enqueue(self, fn, args):
                r.lpush(QUEUE, json.dumps({"class": fn, "args": list(args)}))

            def enqueue_many(self, fn, arglist):
                with r.pipeline(transaction=False) as p:
                    for a in arglist:
                        p.lpush(QUEUE, json.dumps({"class": fn, "args": list(a)}))
                    p.execute()

        return Client()


SYSTEMS = [Bare("2rt"), Bare("lua"), Bare("ahead"), Bare("batch8"), Bare("batch32")]
