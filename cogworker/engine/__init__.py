"""One worker identity's loop: fetch -> execute -> settle (docs/architecture.md#life-of-a-job).
``fetch/`` (how jobs leave their queues), ``lookahead`` (fetch strategies), ``execute``
(one job -> an Outcome), ``eventloop`` (async jobs' loop), ``ledger`` (an outcome -> a
decision -> written; what the worker still owes Redis), ``reporter`` (what the loop tells
its owner), ``loop`` (the ``Worker``), ``flights`` (M jobs in flight)."""
