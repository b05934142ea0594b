from apps import basic
from core_util import run_worker_until


def test_enqueue_and_run(config):
    r = config.redis()
    jids = [basic.add.enqueue(i, 1) for i in range(5)]
    assert all(jids)
    run_worker_until(lambda: r.llen("test:ran") == 5)
    assert sorted(r.lrange("test:ran", 0, -1)) == sorted(f"add:{i}:1".encode() for i in range(5))
    assert r.llen(config.keys.queue("default")) == 0
    assert int(r.get(config.keys.stats_processed)) == 5
