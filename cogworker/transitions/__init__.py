"""A job's transitions: the Lua scripts (one file each, beside these modules) and one
typed function per entry script, the only place its KEYS and ARGV are put in order
(docs/architecture.md#transitions). Nothing else in cogworker sends EVAL/EVALSHA or calls
the script runner (``store.lua``); an import contract and tests/test_transitions.py say so.

``call`` is what they share; the rest, by the part of a job's life they write:
``fetch``, ``settle``, ``push``, ``batches``, ``periodic``, ``limits``, ``process``,
``housekeeping``, ``operator``, ``retention``.
"""
