"""The workloads. Each function measures one repetition for one system, in a fresh
private redis-server, and returns a dict of numbers (JSON-ready).

Every system gets the same job bodies (bench/apps/bench_body.py), the same job
counts and the same timing method; nothing here knows which system it measures
except through the System interface.
"""

import json
import os
import statistics
import subprocess
import tempfile
import threading
import time

import redis

from bench import env, rcpu
from bench.fleet import Fleet, FleetError
from bench.redis_server import RedisServer

STOP = threading.Event()  # set on TERM/Ctrl-C: every wait below gives up at once
START_TIMEOUT = 30.0  # a fleet that completes no job in this long has failed
STALL_TIMEOUT = 30.0  # ... and one that completes no more jobs for this long


def start_driver(ctx, system, url, spec):
    """Start bench.driver (the client side) in the system's interpreter."""
    spec = {**spec, "system": system.name}
    return subprocess.Popen(
        [ctx.python_for(system), "-m", "bench.driver", json.dumps(spec)],
        env=env.worker_env(url, system.worker_env()),
        cwd=env.REPO,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def driver_result(proc, timeout=300):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise FleetError(f"the driver did not finish in {timeout} s") from None
    if proc.returncode != 0:
        raise FleetError(f"driver failed: {err.strip()[-800:]}")
    return json.loads(out.strip().splitlines()[-1])


def driver(ctx, system, url, spec):
    """Run bench.driver to completion; returns its JSON answer."""
    return driver_result(start_driver(ctx, system, url, spec))


class Prefill:
    """Jobs put on a queue by the system's own client, once, then copied.

    The first time a (system, job, n) is needed, it is enqueued through the system's
    client into a scratch Redis and every key is DUMPed; each measurement then RESTOREs
    that snapshot into its own Redis. Same bytes in Redis every repetition, and a slow
    client (Celery enqueues ~2,000/s) costs its time once, outside any measurement.
    """

    def __init__(self):
        self.snapshots = {}
        self.counts = {}  # jobs in each snapshot: fewer than asked when a time-bounded fill stopped

    def ensure(self, ctx, system, fn, args, n, max_seconds=None):
        key = (system.client_key, fn, json.dumps(args), n)
        if key not in self.snapshots:
            self.snapshots[key], self.counts[key] = self._snapshot(ctx, system, fn, args, n, max_seconds)
        return self.snapshots[key]

    def restore(self, ctx, system, r, fn, args, n, max_seconds=None):
        """Workers may already be blocked on the queue (warm-ups, cpu, recovery): so first
        every key a queue entry may refer to (job hashes and the like), then the lists, all
        in one MULTI, so that no worker sees an entry whose job is not there yet."""
        snapshot = self.ensure(ctx, system, fn, args, n, max_seconds)
        lists = [item for item in snapshot if item[3] == b"list"]
        with r.pipeline(transaction=False) as p:
            for i, (k, ttl, dumped, _type) in enumerate(item for item in snapshot if item[3] != b"list"):
                p.restore(k, ttl, dumped, replace=True)
                if i % 1000 == 999:
                    p.execute()
            p.execute()
        with r.pipeline(transaction=True) as p:
            for k, ttl, dumped, _type in lists:
                p.restore(k, ttl, dumped, replace=True)
            p.execute()
        return self.counts[(system.client_key, fn, json.dumps(args), n)]

    def _snapshot(self, ctx, system, fn, args, n, max_seconds):
        with RedisServer() as rs:
            filled = driver(
                ctx, system, rs.url, {"action": "fill", "fn": fn, "args": args, "n": n, "max_seconds": max_seconds}
            )
            r = redis.Redis.from_url(rs.url)
            names = list(r.scan_iter(count=1000))
            with r.pipeline(transaction=False) as p:
                for k in names:
                    p.pttl(k)
                    p.dump(k)
                    p.type(k)
                vals = p.execute()
        return [(k, max(0, vals[3 * i]), vals[3 * i + 1], vals[3 * i + 2]) for i, k in enumerate(names)], filled["n"]

    def clear(self):
        """Forget the big snapshots (they can hold hundreds of MB); keep the warm-up ones."""
        for key in [k for k in self.snapshots if k[3] > 100]:
            del self.snapshots[key], self.counts[key]


def warm_up(ctx, system, r, fleet, jobs):
    """Run a few no-op jobs (from a snapshot) so every worker process is up, connected and
    idle again, then clear the counters: for workloads that must not time start-up."""
    ctx.prefill.restore(ctx, system, r, "noop", [""], jobs)
    if _wait_done(r, fleet, jobs, cap=60):
        raise FleetError(f"warm-up: not all {jobs} jobs ran\n{fleet.log_tail()}")
    time.sleep(0.3)
    r.delete("bench:done", "bench:marks", "bench:step")


def marks_of(r):
    """bench:marks -> sorted [(count, server time)]."""
    return sorted((int(k), float(v)) for k, v in r.hgetall("bench:marks").items())


def _wait_done(r, fleet, n, cap, meter=None):
    """Poll the done counter until n jobs are done, or `cap` seconds after the first
    one (then the run is cut short and the count says how many ran). `meter`: a
    SteadyMeter, told every count (it reads Redis's CPU over the steady window)."""
    first_seen = None
    last, last_change = 0, time.monotonic()
    count = lambda: int(r.get("bench:done") or 0)  # noqa: E731
    while True:
        time.sleep(0.02)
        if STOP.is_set():
            raise FleetError("interrupted")
        done = count()
        now = time.monotonic()
        if meter is not None:
            meter.saw(done, count)
        if done >= n:
            return False
        if done and first_seen is None:
            first_seen = now
        if done != last:
            last, last_change = done, now
        elif done and now - last_change > STALL_TIMEOUT:
            raise FleetError(f"stalled: {done} of {n} jobs done, none for {STALL_TIMEOUT:.0f} s")
        if first_seen is None and now - fleet.started_mono > START_TIMEOUT:
            raise FleetError(f"no job done in {START_TIMEOUT:.0f} s\n{fleet.log_tail()}")
        if first_seen is not None and now - first_seen > cap:
            if meter is not None:
                meter.cut(count)
            return True
        if not fleet.alive():
            raise FleetError(f"the workers exited after {done} jobs\n{fleet.log_tail()}")


class SteadyMeter:
    """Redis's CPU and commands over the steady window: from the moment 10% of the n jobs
    are done to the moment 90% are (or the time cap, for a run cut short). The count is
    read again just after each snapshot, so the jobs done while INFO ran are on its side."""

    def __init__(self, r, n):
        self.r, self.n = r, n
        self.lo = self.hi = None  # (snapshot, count)

    def saw(self, done, count):
        if self.lo is None and done >= 0.1 * self.n:
            self.lo = (rcpu.snapshot(self.r), count())
        if self.lo is not None and self.hi is None and done >= 0.9 * self.n:
            self.hi = (rcpu.snapshot(self.r), count())

    def cut(self, count):
        if self.lo is not None and self.hi is None:
            self.hi = (rcpu.snapshot(self.r), count())

    def result(self):
        if self.lo is None or self.hi is None:
            return rcpu.per_job(None, None, 0)
        return rcpu.per_job(self.lo[0], self.hi[0], self.hi[1] - self.lo[1])


def throughput(ctx, system, procs, payload, n, cap):
    """n no-op jobs (one `payload`-byte string argument) enqueued before the workers
    start; jobs/s from the first completion to the last, and steady state (10%..90%)."""
    step = max(1, n // 1000)  # fine enough for a run cut after a few dozen jobs
    n = -(-n // step) * step  # a multiple of step, so the last job is a mark
    with RedisServer() as rs:
        r = redis.Redis.from_url(rs.url)
        ctx.prefill.restore(ctx, system, r, "noop", ["x" * payload], n)
        r.set("bench:step", step)
        fleet = Fleet(ctx, system, procs, rs.url, log_name=f"throughput-{procs}p-{payload}B")
        meter = SteadyMeter(r, n)
        try:
            fleet.start()
            capped = _wait_done(r, fleet, n, cap, meter)
        finally:
            fleet.stop()
        marks = marks_of(r)
    (c1, t1), (cn, tn) = marks[0], marks[-1]
    lo = [m for m in marks if m[0] >= 0.1 * cn][0]
    hi = [m for m in marks if m[0] <= 0.9 * cn][-1]
    return {
        "n": cn,
        "enqueued": n,
        "capped": capped,
        "overall": (cn - c1) / (tn - t1) if tn > t1 else None,
        "steady": (hi[0] - lo[0]) / (hi[1] - lo[1]) if hi[1] > lo[1] else None,
        "startup_s": t1 - fleet.launched_at,
        **meter.result(),
    }


def cpu_scaling(ctx, system, procs, n, iterations):
    """n jobs of pure-Python CPU work, put on the queue at once while every worker process
    is up and idle; jobs/s from the first start to the last completion, and the
    efficiency against the ideal procs / job time. The jobs record themselves in files
    (bench_body.cpu), not in Redis."""
    ctx.prefill.ensure(ctx, system, "cpu", [iterations], n)
    ctx.prefill.ensure(ctx, system, "noop", [""], 4 * procs)
    alone = job_time_alone(iterations)
    with RedisServer() as rs, tempfile.TemporaryDirectory(prefix="bench-marks-") as marks_dir:
        r = redis.Redis.from_url(rs.url)
        fleet = Fleet(ctx, system, procs, rs.url, extra_env={"BENCH_MARKS_DIR": marks_dir}, log_name=f"cpu-{procs}p")
        try:
            fleet.start()
            # Warm up first: the second process booting late is start-up, not scaling.
            warm_up(ctx, system, r, fleet, 4 * procs)
            ctx.prefill.restore(ctx, system, r, "cpu", [iterations], n)
            _wait_records(marks_dir, fleet, n)
        finally:
            fleet.stop()
        records = _cpu_records(marks_dir)
    first_start = min(start for start, _, _ in records)
    wall = max(end for _, end, _ in records) - first_start
    burn_cpu = sum(spent for _, _, spent in records)
    rate = n / wall
    # efficiency: jobs/s against the ideal procs / job time, the job time being the mean CPU
    # time the work took in this run (= share of procs x wall spent in the jobs' work).
    # efficiency_vs_alone: the job time measured alone, in the orchestrator, just before.
    return {
        "n": n,
        "rate": rate,
        "job_ms": burn_cpu / n * 1000,
        "alone_ms": alone * 1000,
        "efficiency": burn_cpu / (procs * wall),
        "efficiency_vs_alone": rate * alone / procs,
    }


def _cpu_records(marks_dir):
    from bench_body import CPU_RECORD_SIZE  # bench/apps is on sys.path (run.calibrate_cpu)

    records = []
    for name in os.listdir(marks_dir):
        with open(os.path.join(marks_dir, name)) as f:
            records += [tuple(map(float, line.split())) for line in f if len(line) == CPU_RECORD_SIZE]
    return records


def _wait_records(marks_dir, fleet, n, cap=600):
    """Until n CPU records are written: their files' sizes tell, no reading needed."""
    from bench_body import CPU_RECORD_SIZE

    started = time.monotonic()
    last, last_change = 0, started
    while True:
        time.sleep(0.02)
        if STOP.is_set():
            raise FleetError("interrupted")
        done = sum(os.stat(os.path.join(marks_dir, name)).st_size for name in os.listdir(marks_dir))
        done //= CPU_RECORD_SIZE
        now = time.monotonic()
        if done >= n:
            return
        if done != last:
            last, last_change = done, now
        elif now - last_change > (START_TIMEOUT if not done else STALL_TIMEOUT):
            raise FleetError(f"stalled: {done} of {n} cpu jobs done\n{fleet.log_tail()}")
        if now - started > cap:
            raise FleetError("cpu run did not finish")
        if not fleet.alive():
            raise FleetError(f"the workers exited after {done} cpu jobs\n{fleet.log_tail()}")


def job_time_alone(iterations, runs=7):
    """CPU seconds of the work run alone here, now (the machine's speed drifts)."""
    from bench_body import burn  # bench/apps is on sys.path (run.calibrate_cpu)

    times = []
    for _ in range(runs):
        t = time.thread_time()
        burn(iterations)
        times.append(time.thread_time() - t)
    return statistics.median(times)


def percentile(values, q):
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def latency(ctx, system, procs, n, min_gap, max_gap, seed):
    """Idle workers; n probe jobs enqueued one at a time at random gaps (the same schedule
    for every system); pickup latency = the job's start time - the time just before enqueue."""
    ctx.prefill.ensure(ctx, system, "noop", [""], 2 * procs)
    with RedisServer() as rs:
        r = redis.Redis.from_url(rs.url)
        fleet = Fleet(ctx, system, procs, rs.url, log_name="latency")
        producer = None
        try:
            fleet.start()
            # The producer imports its library while the workers boot; it waits for "go".
            producer = start_driver(
                ctx, system, rs.url, {"action": "latency", "n": n, "min_gap": min_gap, "max_gap": max_gap, "seed": seed}
            )
            warm_up(ctx, system, r, fleet, 2 * procs)
            r.lpush("bench:go", 1)
            driver_result(producer)
        finally:
            if producer is not None and producer.poll() is None:
                producer.kill()
                producer.wait()
            fleet.stop()
        rows = [line.decode().split() for line in r.lrange("bench:probe_seen", 0, -1)]
    ms = [(float(t_start) - float(t_enq)) * 1000 for _tok, _pid, t_enq, t_start in rows]
    if len(ms) < n:
        raise FleetError(f"only {len(ms)} of {n} probes ran")
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 0.50),
        "p95_ms": percentile(ms, 0.95),
        "p99_ms": percentile(ms, 0.99),
        "max_ms": max(ms),
    }


def enqueue(ctx, system, n_single, n_bulk, chunk, payload):
    """One producer, no workers: single enqueue calls, then the library's bulk API."""
    with RedisServer() as rs:
        return driver(
            ctx,
            system,
            rs.url,
            {"action": "enqueue", "n_single": n_single, "n_bulk": n_bulk, "chunk": chunk, "payload": payload},
        )


def memory(ctx, system, procs, warmup):
    """USS/RSS of every worker process with the 50 MB module preloaded, after a few jobs."""
    ctx.prefill.ensure(ctx, system, "noop", [""], warmup)
    with RedisServer() as rs:
        r = redis.Redis.from_url(rs.url)
        fleet = Fleet(ctx, system, procs, rs.url, extra_env={"BENCH_BALLAST": "1"}, log_name=f"memory-{procs}p")
        try:
            fleet.start()
            warm_up(ctx, system, r, fleet, warmup)
            masters, children = [], []
            for root, kids in fleet.tree():
                # A root with children is a master (it forked them); a root without is
                # itself a job process (RQ: N independent worker processes).
                (masters if kids else children).append(_mem(root))
                children += [_mem(k) for k in kids]
        finally:
            fleet.stop()
    mb = 1024 * 1024
    return {
        "procs": len(children),
        "child_uss_mb": statistics.median(m[0] for m in children) / mb,
        "child_rss_mb": statistics.median(m[1] for m in children) / mb,
        "master_uss_mb": sum(m[0] for m in masters) / mb,
        "master_rss_mb": sum(m[1] for m in masters) / mb,
        "total_uss_mb": sum(m[0] for m in masters + children) / mb,
    }


def _mem(proc):
    info = proc.memory_full_info()
    return info.uss, info.rss
