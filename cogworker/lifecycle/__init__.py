"""Subscribers of the lifecycle hooks (``core.hooks``), independent of each other: unique
locks (``unique``), counters and throughput (``stats``), job status and history
(``history``), the DEBUG line per success (``joblog``). ``core`` never imports them."""
