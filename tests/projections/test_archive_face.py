"""The Parquet archive's files are on the projections' face, and pyarrow (the
`retention` extra) is imported only when they are first used."""

from __future__ import annotations

import subprocess
import sys

import pytest

LOOKED_AT = """
import sys
import eventcraft.projections as projections
before = "pyarrow" in sys.modules
files = projections.ArchiveFiles
print(before, "pyarrow" in sys.modules, files.__module__)
"""


@pytest.mark.slow
def test_archive_files_import_pyarrow_only_when_first_used() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOOKED_AT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "eventcraft.projections.archive_files"]
