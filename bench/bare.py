"""One bare-protocol worker process (the ceiling row). Started by the orchestrator as
`python -m bench.bare --variant V --index I`, N of them; stopped by a signal.

Variants (LPUSH enqueue, fetch from the right: FIFO):
- 2rt:    BLMOVE queue -> own in-progress list; run; LREM: two round trips per job.
- lua:    one script does LREM of the previous job + LMOVE of the next: one round trip
          per job while the queue is non-empty (blocking BLMOVE only when it is empty).
- batch8: one pipeline does LREM of the previous batch + 8 x LMOVE.
- batch32: the same with 32 (cogworker's deepest look-ahead, lookahead.Depth.MAX).
- ahead:  the lua variant's script, sent just before the job runs and its reply read
          after (cogworker's look-ahead): the round trip overlaps the job.
"""

import argparse
import json
import os
import signal
import sys

import bench_body
from redis import Redis

from bench.systems.bare import QUEUE

ACK_AND_FETCH = """
if ARGV[1] ~= '' then redis.call('LREM', KEYS[2], -1, ARGV[1]) end
return redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
"""


def run(raw):
    job = json.loads(raw)
    getattr(bench_body, job["class"])(*job["args"])


def loop_2rt(r, inprog):
    while True:
        raw = r.blmove(QUEUE, inprog, 1, "RIGHT", "LEFT")
        if raw is not None:
            run(raw)
            r.lrem(inprog, -1, raw)


def loop_lua(r, inprog):
    ack_and_fetch = r.register_script(ACK_AND_FETCH)
    prev = b""
    while True:
        raw = ack_and_fetch(keys=[QUEUE, inprog], args=[prev])
        if raw is None:
            raw = r.blmove(QUEUE, inprog, 1, "RIGHT", "LEFT")
        prev = raw or b""
        if raw is not None:
            run(raw)


def loop_ahead(r, inprog):
    ack_and_fetch = r.register_script(ACK_AND_FETCH)
    conn = r.connection_pool.make_connection()  # ours alone: a reply waits on it while the job runs
    prev, raw = b"", None
    while True:
        if raw is None:  # nothing fetched ahead: fetch now (blocking if the queue is empty)
            raw = ack_and_fetch(keys=[QUEUE, inprog], args=[prev])
            prev = b""
            if raw is None:
                raw = r.blmove(QUEUE, inprog, 1, "RIGHT", "LEFT")
            continue
        conn.send_command("EVALSHA", ack_and_fetch.sha, 2, QUEUE, inprog, prev)
        run(raw)
        prev, raw = raw, conn.read_response()


def loop_batch8(r, inprog, size=8):
    prev = []
    while True:
        with r.pipeline(transaction=False) as p:
            for raw in prev:
                p.lrem(inprog, -1, raw)
            for _ in range(size):
                p.lmove(QUEUE, inprog, "RIGHT", "LEFT")
            batch = [raw for raw in p.execute()[len(prev) :] if raw is not None]
        if not batch:
            raw = r.blmove(QUEUE, inprog, 1, "RIGHT", "LEFT")
            batch = [raw] if raw is not None else []
        for raw in batch:
            run(raw)
        prev = batch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["2rt", "lua", "ahead", "batch8", "batch32"], required=True)
    ap.add_argument("--index", type=int, default=0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    r = Redis.from_url(os.environ["BENCH_REDIS_URL"])
    inprog = f"bare:in_progress:{args.index}"
    loops = {
        "2rt": loop_2rt,
        "lua": loop_lua,
        "ahead": loop_ahead,
        "batch8": loop_batch8,
        "batch32": lambda r, inprog: loop_batch8(r, inprog, 32),
    }
    loops[args.variant](r, inprog)


if __name__ == "__main__":
    main()
