import threading
import time

from apps import basic

from cogworker.worker import Worker


def run_worker_until(predicate, queues=(("default", None),), timeout=10.0, **kwargs):
    worker = Worker(list(queues), block_timeout=0.2, **kwargs)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and not predicate():
            time.sleep(0.02)
    finally:
        worker.stop()
        thread.join(10)
    return worker


def test_enqueue_and_run(config):
    r = config.redis()
    jids = [basic.add.enqueue(i, 1) for i in range(5)]
    assert all(jids)
    run_worker_until(lambda: r.llen("test:ran") == 5)
    assert sorted(r.lrange("test:ran", 0, -1)) == sorted(f"add:{i}:1".encode() for i in range(5))
    assert r.llen(config.keys.queue("default")) == 0
    assert int(r.get(config.keys.stats_processed)) == 5
