"""About 50 MB of ordinary Python objects, built at import time.

It stands for the big application a worker preloads (an ORM, models, tables).
Tuples and strings, not one bytes blob: the collector walks container objects, so
pages shared copy-on-write with the parent get written to unless the system
freezes them before forking. That is exactly what the memory workload measures.
"""

import os

MEGABYTES = int(os.environ.get("BENCH_BALLAST_MB", "50"))
# ~213 bytes per entry: a 56-char str, a small int, a 2-tuple, a list slot.
DATA = [(f"{i:056d}", i) for i in range(MEGABYTES * 1_000_000 // 213)]
