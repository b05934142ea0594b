"""What both worker commands (``cogworker-prefork``, ``python -m cogworker.worker``) and the
``cogworker`` command share: importing the app (``app``), the flags (``flags``), argument
types (``argtypes``), logging (``logs``) and the ``-q NAME[,WEIGHT]`` list (``queues``)."""
