"""An app whose children die right after fork, before their first fetch (a bad deploy)."""

import os

import cogworker  # noqa: F401
from apps.pf_faults import logged  # noqa: F401  (a job: a worker refuses a module that registers none)

os.register_at_fork(after_in_child=lambda: os._exit(3))
