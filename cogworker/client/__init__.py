"""Enqueueing: ``enqueue`` (single, bulk, scheduled; the client middleware), ``aio`` (the
same on ``redis.asyncio``), ``status`` (the status a push writes), and ``jobs`` (``@job``
and its handles, which call them)."""
