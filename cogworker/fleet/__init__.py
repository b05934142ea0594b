"""What keeps the fleet whole besides running jobs: orphan recovery (``recovery``: dead
processes' lists, the watch rule), the poller of ``schedule`` and ``retry`` (``poller``),
and ``housekeeping`` (the beat, recovery, the poller, the cron ticker and the stats flush
as one component for the master and the runner)."""
