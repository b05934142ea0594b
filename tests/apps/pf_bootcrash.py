"""An app whose children die right after fork, before their first fetch (a bad deploy)."""

import os

import cogworker  # noqa: F401

os.register_at_fork(after_in_child=lambda: os._exit(3))
