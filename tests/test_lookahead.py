"""Look-ahead in prefork children (issue 4's prefetch rules), with real forks, real
signals and a private redis-server:

- the job fetched ahead sits on the child's own in-progress list;
- a child that dies has an orphaning counted for its running job only;
- at shutdown (or quiet) a job fetched ahead goes back to its queue at once;
- a sibling that runs dry takes a job fetched ahead instead of idling;
- ``--no-lookahead`` turns it off.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from apps import pf
from prefork_harness import in_progress_total, lrange, queue_len, wait_for

from cogworker.prefork.slots import ACK_DUE, RUNNING, Slots


def listed(config):
    """Every in-progress entry, as {jid: payload}."""
    r = config.redis()
    out = {}
    for key in r.scan_iter(match=config.keys.in_progress_prefix + "*"):
        for raw in r.lrange(key, 0, -1):
            job = json.loads(raw)
            out[job["jid"]] = job
    return out


def started(config):
    """test:started entries -> [(tag, pid, time)] (pf.slow writes tag:pid:time)."""
    out = []
    for entry in lrange(config, "test:started"):
        tag, pid, *rest = entry.split(":")
        out.append((tag, int(pid), float(rest[0]) if rest else None))
    return out


def one_job_fetched_ahead(config, masters, seconds, **master_args):
    """A one-child master running slow("long", seconds) with record("waiting") fetched
    ahead behind it; returns (master, waiting's jid)."""
    pf.slow.enqueue("long", seconds)
    waiting = pf.record.enqueue("waiting")
    m = masters(procs=1, **master_args)
    wait_for(lambda: started(config), what="long job start")
    wait_for(lambda: waiting in listed(config), 5, what="fetched ahead")
    return m, waiting


def test_the_next_job_is_fetched_ahead_onto_the_childs_own_list(own_config, masters):
    pf.slow.enqueue("first", 1.5)
    ahead_jid = pf.record.enqueue("second")
    m = masters(procs=1)
    wait_for(lambda: started(own_config), what="first job start")
    # Both on the child's one list: the running job and the one fetched ahead.
    r = own_config.redis()
    lists = [k for k in r.scan_iter(match=own_config.keys.in_progress_prefix + "*")]
    assert len(lists) == 1 and r.llen(lists[0]) == 2
    assert ahead_jid in listed(own_config) and queue_len(own_config) == 0
    wait_for(lambda: lrange(own_config, "test:ran") == ["second"], what="second job")
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert m.alive()


def test_no_lookahead_leaves_the_next_job_on_its_queue(own_config, masters):
    pf.slow.enqueue("first", 1.0)
    pf.record.enqueue("second")
    masters(procs=1, args=["--no-lookahead"])
    wait_for(lambda: started(own_config), what="first job start")
    time.sleep(0.2)
    assert in_progress_total(own_config) == 1 and queue_len(own_config) == 1
    wait_for(lambda: lrange(own_config, "test:ran") == ["second"], what="second job")


def test_a_killed_child_counts_an_orphaning_for_its_running_job_only(own_config, masters):
    victim = pf.slow.enqueue("victim", 2)
    bystander = pf.record.enqueue("bystander")
    m = masters(procs=1)
    wait_for(lambda: started(own_config), what="victim start")
    wait_for(lambda: bystander in listed(own_config), 5, what="bystander fetched ahead")
    pid = started(own_config)[0][1]
    os.kill(pid, signal.SIGKILL)
    # Both requeued at once; only the victim counts an orphaning.
    wait_for(lambda: len(started(own_config)) == 2, what="victim running again")
    r = own_config.redis()
    assert r.get(own_config.keys.orphanings(victim)) == b"1"
    assert r.get(own_config.keys.orphanings(bystander)) is None
    wait_for(lambda: lrange(own_config, "test:done") == ["victim"], what="victim done")
    # It starts after the victim ends: waited for, not raced (it may not have started yet).
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert lrange(own_config, "test:ran") == ["bystander"]  # ran once, after the restart
    assert m.alive()


def test_term_puts_the_job_fetched_ahead_back_at_once(own_config, masters):
    m, waiting = one_job_fetched_ahead(own_config, masters, 3, args=["--timeout", "10"])
    m.signal(signal.SIGTERM)
    # Back on the queue while the long job still runs, not when it ends.
    wait_for(lambda: queue_len(own_config) == 1, 2, what="job fetched ahead back on its queue")
    assert lrange(own_config, "test:done") == []
    assert m.wait_exit(15) == 0
    assert lrange(own_config, "test:done") == ["long"] and lrange(own_config, "test:ran") == []
    assert json.loads(own_config.redis().lrange(own_config.keys.queue("default"), 0, -1)[0])["jid"] == waiting
    assert in_progress_total(own_config) == 0
    assert own_config.redis().get(own_config.keys.orphanings(waiting)) is None


def test_a_recycled_child_puts_the_job_fetched_ahead_back_at_once(own_config, masters):
    """HUP (like --max-jobs, --max-memory, TTOU) stops a child gracefully: its running
    job finishes, the job it fetched ahead doesn't wait for that."""
    m, waiting = one_job_fetched_ahead(own_config, masters, 3)
    m.signal(signal.SIGHUP)
    wait_for(
        lambda: queue_len(own_config) == 1 or lrange(own_config, "test:ran"),
        2,
        what="job fetched ahead back on its queue (or already run by the new child)",
    )
    assert lrange(own_config, "test:done") == []  # the long job still runs
    wait_for(lambda: lrange(own_config, "test:ran") == ["waiting"], 10, what="waiting job run")
    wait_for(lambda: lrange(own_config, "test:done") == ["long"], 10, what="long job done")
    assert len(started(own_config)) == 1  # the long job was not interrupted or re-run
    assert own_config.redis().get(own_config.keys.orphanings(waiting)) is None


def test_quiet_puts_the_job_fetched_ahead_back_at_once(own_config, masters):
    m, waiting = one_job_fetched_ahead(own_config, masters, 2)
    m.signal(signal.SIGTSTP)
    wait_for(lambda: queue_len(own_config) == 1, 2, what="job fetched ahead back on its queue")
    wait_for(lambda: lrange(own_config, "test:done") == ["long"], what="long job done")
    time.sleep(0.5)
    assert lrange(own_config, "test:ran") == [] and queue_len(own_config) == 1  # quiet: not run
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")


def test_a_sibling_that_runs_dry_takes_the_job_fetched_ahead(own_config, masters):
    m = masters(procs=2)
    m.wait_children()
    time.sleep(0.5)  # both children blocked on the empty queue
    pf.slow.enqueue("short", 1.0)
    wait_for(lambda: started(own_config), what="short job start")
    # The other child takes "long"; "taken" is fetched ahead behind it (its sibling is busy).
    pf.slow.enqueue("long", 4)
    taken = pf.slow.enqueue("taken", 0)
    wait_for(lambda: len(started(own_config)) >= 2, what="long job start")
    wait_for(lambda: taken in listed(own_config) or len(started(own_config)) == 3, 5, what="fetched ahead")
    # The short job's child runs dry after ~1 s and takes it: it runs long before "long" ends.
    wait_for(lambda: len(started(own_config)) == 3, 3, what="the job fetched ahead, taken over")
    runs = {tag: (pid, at) for tag, pid, at in started(own_config)}
    assert runs["taken"][0] == runs["short"][0] != runs["long"][0]
    # "taken" started; its end is written a moment after (it once wasn't yet, under load).
    wait_for(lambda: len(lrange(own_config, "test:done")) >= 2, 3, what="the taken job's end")
    assert lrange(own_config, "test:done")[:2] == ["short", "taken"]
    wait_for(lambda: lrange(own_config, "test:done") == ["short", "taken", "long"], 10, what="all done")
    assert len(started(own_config)) == 3  # nothing ran twice
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert own_config.redis().hlen(own_config.keys.ahead) <= 2
    assert m.alive()
    assert "fetched ahead was taken over" not in m.output()  # routine: DEBUG, not the INFO log


def test_many_jobs_two_children_each_runs_exactly_once(own_config, masters):
    """Look-ahead, ack riding on it, and take-overs at the end of the queue: no job lost
    or run twice."""
    m = masters(procs=2)
    m.wait_children()
    pf.record.enqueue_many([(f"j{i}",) for i in range(2000)])
    wait_for(lambda: own_config.redis().llen("test:ran") == 2000, 60, what="2000 jobs")
    assert sorted(lrange(own_config, "test:ran")) == sorted(f"j{i}" for i in range(2000))
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0
    assert own_config.redis().hlen(own_config.keys.ahead) == 0  # records go with their children


def test_scripts_flushed_mid_job_every_job_runs_once(own_config, masters):
    """The look-ahead sent after a SCRIPT FLUSH gets NOSCRIPT: it did not run, so its ack
    stays due and the plain fetch (which loads the script again) carries it."""
    pf.slow.enqueue("a", 1.0)
    pf.record.enqueue_many([(f"r{i}",) for i in range(5)])
    masters(procs=1)
    wait_for(lambda: started(own_config), what="first job start")
    own_config.redis().script_flush()
    wait_for(lambda: len(lrange(own_config, "test:ran")) == 5, 10, what="the rest")
    assert sorted(lrange(own_config, "test:ran")) == [f"r{i}" for i in range(5)]
    assert lrange(own_config, "test:done") == ["a"]
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")


def test_slot_carries_the_ack_riding_on_a_look_ahead():
    slots = Slots(2)
    slots.reset(0)
    writer = slots.writer(0)
    writer.begin("host:1:ab")
    writer.ahead(7, "prev-jid")
    writer.write(RUNNING, "cur-jid", None, 1.0, "k", "q")  # keeps the look-ahead fields
    state = slots.read(0)
    assert (state.state, state.jid, state.ack_jid, state.ahead, state.identity) == (
        RUNNING,
        "cur-jid",
        "prev-jid",
        7,
        "host:1:ab",
    )
    writer.finished(ack_due=True)
    writer.ahead(0)  # came back: the riding ack is settled either way
    state = slots.read(0)
    assert (state.state, state.jid, state.ack_jid, state.ahead) == (ACK_DUE, "cur-jid", "", 0)
    assert slots.high() == 1


def test_garbage_fetched_ahead_goes_to_dead_and_the_child_goes_on(own_config, masters):
    r = own_config.redis()
    queue = own_config.keys.queue("default")
    pf.slow.enqueue("long", 1.0)
    r.lpush(queue, b"\xff not json")  # behind "long": the child fetches it ahead
    pf.record.enqueue("after")
    m = masters(procs=1)
    wait_for(lambda: started(own_config), what="long job start")

    def garbage_listed():
        keys = r.scan_iter(match=own_config.keys.in_progress_prefix + "*")
        return any(b"\xff not json" in r.lrange(k, 0, -1) for k in keys)

    wait_for(garbage_listed, 5, what="garbage fetched ahead")
    wait_for(lambda: lrange(own_config, "test:ran") == ["after"], 10, what="the job behind the garbage")
    dead = [json.loads(raw) for raw in r.zrange(own_config.keys.dead, 0, -1)]
    assert len(dead) == 1 and dead[0]["error_class"] == "cogworker.BadPayload"
    assert "not json" in dead[0]["raw_payload"]
    assert lrange(own_config, "test:done") == ["long"] and queue_len(own_config) == 0
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert m.alive()


def test_a_hand_over_lock_dies_with_its_holder():
    """A child SIGKILLed while it holds a sibling's lock (mid take-over) must not leave
    that sibling unable to claim its next job: the kernel drops fcntl locks of the dead."""
    slots = Slots(2)
    pid = os.fork()
    if pid == 0:
        slots.lock(1)
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    claimed = threading.Event()

    def claim():
        slots.lock(1)
        slots.unlock(1)
        claimed.set()

    threading.Thread(target=claim, daemon=True).start()
    assert claimed.wait(5)


def test_a_child_killed_amid_lookaheads_runs_each_job_again_at_most_once(own_config, masters):
    """Short jobs on a deep queue: the child fetches up to 8 per round trip, holding the
    acks of the ones it ran. SIGKILLed mid-stream, nothing is lost; its held acks are
    dropped (those jobs never run again); only the one job it was running may run twice
    and has an orphaning counted; the jobs of its look-ahead not started are requeued uncounted."""
    m = masters(procs=1)
    m.wait_children()
    pf.record.enqueue_many([(f"j{i}",) for i in range(3000)])
    r = own_config.redis()
    wait_for(lambda: r.llen("test:ran") >= 800, 30, what="look-aheads under way")
    (pid,) = m.child_pids()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(set(lrange(own_config, "test:ran"))) == 3000, 60, what="every job")
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    ran = lrange(own_config, "test:ran")
    twice = {tag for tag in ran if ran.count(tag) > 1}
    assert len(ran) - 3000 == len(twice) <= 1
    counted = [k for k in r.scan_iter(match=own_config.keys.orphanings("*"))]
    assert len(counted) <= 1
    assert m.alive()


def test_large_jobs_are_fetched_one_at_a_time_by_the_fast_fetch(own_config, masters):
    """A look-ahead of K hands every payload to Lua (which hashes each byte, twice: as the move's
    reply and as the ack); after a job of FAST_MIN_BYTES or more the child asks for one job
    at a time, by the fast fetch's MULTI, whatever K its short jobs reached."""
    from cogworker.engine.fetch.fetcher import FAST_MIN_BYTES

    m = masters(procs=1)
    m.wait_children()
    r = own_config.redis()
    r.config_resetstat()
    n, pad = 400, "x" * FAST_MIN_BYTES
    pf.record.enqueue_many([(f"j{i}:{pad}",) for i in range(n)])
    wait_for(lambda: r.llen("test:ran") >= n, 60, what="every job")
    execs = r.info("commandstats").get("cmdstat_exec", {}).get("calls", 0)
    assert execs >= 0.75 * n, f"only {execs} fast fetches for {n} large jobs"
    assert len(set(lrange(own_config, "test:ran"))) == n
    assert m.alive()


def test_a_child_killed_amid_large_jobs_runs_each_job_again_at_most_once(own_config, masters):
    """Large jobs go one at a time by the fast fetch (its ack a plain LREM in a MULTI):
    SIGKILLed mid-stream, nothing is lost, only the job it was running may run twice, and
    no mark of the fast fetch is left on any list."""
    from cogworker.engine.fetch.fetcher import FAST_MIN_BYTES

    m = masters(procs=1)
    m.wait_children()
    n, pad = 600, "x" * FAST_MIN_BYTES
    pf.record.enqueue_many([(f"j{i}:{pad}",) for i in range(n)])
    r = own_config.redis()
    wait_for(lambda: r.llen("test:ran") >= 150, 30, what="large jobs under way")
    (pid,) = m.child_pids()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(set(lrange(own_config, "test:ran"))) == n, 60, what="every job")
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    ran = lrange(own_config, "test:ran")
    assert len(ran) - n == len({tag for tag in ran if ran.count(tag) > 1}) <= 1
    assert m.alive()
