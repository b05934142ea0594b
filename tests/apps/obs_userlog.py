"""An app that configures logging itself: the worker commands must keep its configuration."""

import logging

logging.basicConfig(format="USERCONF %(levelname)s %(message)s", level=logging.INFO)

from apps.obs_app import boom, ok  # noqa: E402,F401  (the jobs)
