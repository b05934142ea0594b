"""What /metrics shows (docs/architecture.md#metrics): the job counts each process keeps
(``jobcounts``, a hook subscriber), the collector and the Redis sampler (``exporter``), and
the non-blocking HTTP server the owner's loop drives (``http``). The master's and the
runner's exporters (``prefork.exporting``, ``worker.metrics``) are built on them."""
