"""How cogworker.api finds a jid in a big sorted set: ZSCAN with MATCH in chunks (what
the API does) against one Lua script scanning it all. 1,000,000 dead entries; the jid
asked for is absent (the worst case: the whole set is looked at). Prints the time and
Redis's longest command (SLOWLOG) for each.

    .venv/bin/python -m bench.api_find [--entries N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from redis_server import RedisServer  # noqa: E402

import cogworker  # noqa: E402
from cogworker import api  # noqa: E402

LUA_SCAN = """
local n = redis.call("ZCARD", KEYS[1])
for i = 0, n - 1, 1000 do
  for _, e in ipairs(redis.call("ZRANGE", KEYS[1], i, i + 999)) do
    if string.find(e, ARGV[1], 1, true) then return e end
  end
end
return false
"""


def longest_ms(r) -> float:
    return max((e["duration"] for e in r.slowlog_get(1_000_000)), default=0) / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    n = parser.parse_args().entries
    server = RedisServer().start()
    try:
        config = cogworker.configure(redis_url=server.url)
        r = config.redis()
        for start in range(0, n, 10_000):
            r.zadd(
                config.keys.dead,
                {
                    json.dumps(
                        {
                            "class": "app.job",
                            "args": [i],
                            "jid": uuid.uuid4().hex,
                            "queue": "default",
                            "error_class": "ValueError",
                            "error_message": "boom",
                            "failed_at": time.time(),
                        },
                        separators=(",", ":"),
                    ): i
                    for i in range(start, start + 10_000)
                },
            )
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 100_000)
        for label, find in (
            ("ZSCAN MATCH, chunks of 5000 (the API)", lambda: api.DeadSet().find("absent")),
            ("one Lua script, string.find", lambda: r.eval(LUA_SCAN, 1, config.keys.dead, "absent")),
        ):
            r.slowlog_reset()
            started = time.perf_counter()
            assert find() is None
            print(
                f"{label}: {time.perf_counter() - started:.2f} s for {n} entries; "
                f"longest Redis command {longest_ms(r):.1f} ms"
            )
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
