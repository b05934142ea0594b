"""The single-process worker (``python -m cogworker.worker MODULE``, ``cogworker worker
MODULE``): the whole system in one process, for development and small deployments.
``runner`` is the process; ``metrics`` its /metrics thread."""
