"""The version: its one source. pyproject.toml reads it from here when it builds
(``[tool.setuptools.dynamic]``), and ``cogworker.__version__`` / ``--version`` show it, so a
source tree and an installed wheel can't disagree. A leaf: it imports nothing."""

__version__ = "0.6.0"
