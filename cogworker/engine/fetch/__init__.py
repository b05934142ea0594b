"""Reliable fetch (docs/architecture.md#fetch): ``fetcher`` (queue order, the blocking
fetch, the fetch scripts; the ``Fetcher`` on top of its in-progress list), ``ahead`` (K
jobs in one round trip), ``fast`` (the fast fetch's MULTI for large jobs), ``idle`` (the
queues a fetch leaves out because it found them empty)."""
