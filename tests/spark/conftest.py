"""Without pyspark (outside CI) the Spark tests are not collected; in CI they must run."""

from __future__ import annotations

import importlib.util

from tests.conftest import IN_CI

if importlib.util.find_spec("pyspark") is None and not IN_CI:
    collect_ignore_glob = ["test_*.py"]
