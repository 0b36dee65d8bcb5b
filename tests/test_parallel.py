"""`make test` runs the suite on pytest-xdist workers, and tests/conftest.py keeps some
tests together on one worker (`--dist loadgroup`): a module's tests that share a fixture
(the packaging test's build in the source tree, which two workers at once would break),
the SparkSession's. This checks that groups made as tests/conftest.py makes them (marks
added at collection) are kept: pytest-xdist 3.8 under pytest 9.2 lost them silently."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CONFTEST = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.name.startswith("test_together"):
            item.add_marker(pytest.mark.xdist_group("together"))
"""

TESTS = """
import pytest


@pytest.mark.parametrize("n", range(6))
def test_together(n):
    pass


@pytest.mark.parametrize("n", range(6))
def test_anywhere(n):
    pass
"""


@pytest.mark.slow
def test_tests_grouped_at_collection_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # a root of its own: none of our settings
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent(TESTS))
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v"]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [*command, "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran: dict[str, set[str]] = {}
    for worker, test in re.findall(
        r"^\[(gw\d+)\] .*PASSED test_grouped\.py::(\w+)", done.stdout, re.M
    ):
        ran.setdefault(test, set()).add(worker)
    assert done.stdout.count(" PASSED ") == 12, done.stdout
    # Without the group its first tests would be dealt out to both workers at once.
    assert len(ran["test_together"]) == 1, done.stdout
