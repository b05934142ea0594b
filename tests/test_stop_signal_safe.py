"""A stop asked by a signal handler can't deadlock the worker.

A handler runs in the main thread between two bytecodes, maybe while that thread holds
the stop Event's own lock (inside ``Event.wait``, during a backoff or a quiet pause).
Setting the Event there waited for that lock forever: a child stuck "stopping" in a futex
wait until its master SIGKILLed it (seen once in twenty stops under load). Here the lock
is held on purpose when the signal lands, so the race is not left to chance."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    import cogworker
    from cogworker.engine.loop import Worker

    cogworker.configure(redis_url=sys.argv[1])
    worker = Worker(queues=[("default", 1)], lookahead=False)
    signal.signal(signal.SIGTERM, lambda signum, frame: worker.stop())
    with worker._stopping._cond:  # as inside Event.wait, when the signal lands
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)  # the handler runs here, in this thread, the lock held
    started = time.monotonic()
    worker.pause(30)  # a backoff: a stop cuts it short
    print("stopped", worker.stopping, round(time.monotonic() - started, 2))
    """
)


def test_a_stop_from_a_signal_handler_holding_the_events_lock_returns(config) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, config.redis_url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    word, stopping, seconds = done.stdout.split()
    assert (word, stopping) == ("stopped", "True")
    assert float(seconds) < 5  # the backoff ended at the stop, not after its 30 s
