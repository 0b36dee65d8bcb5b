"""What the executors are told: URLs they can open from their own processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventcraft.projections import DefinitionError
from eventcraft.projections.spark import Archive
from eventcraft.projections.spark.source import check_readable


def test_relative_sqlite_paths_are_made_absolute_for_the_executors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert check_readable("sqlite:///events.db") == f"sqlite:///{tmp_path}/events.db"
    assert check_readable("sqlite:///a/e.db?mode=rw") == f"sqlite:///{tmp_path}/a/e.db?mode=rw"
    assert check_readable("sqlite:////abs/e.db") == "sqlite:////abs/e.db"
    assert check_readable("postgresql://u@h/db?schema=s") == "postgresql://u@h/db?schema=s"
    assert Archive("archive").path == str(tmp_path / "archive")
    assert Archive("hdfs://nn/archive/").path == "hdfs://nn/archive"


@pytest.mark.parametrize(
    "url", ["memory://", "sqlite:///:memory:", "sqlite://", "mysql://h/db", ""]
)
def test_stores_the_executors_cannot_open_are_refused(url: str) -> None:
    with pytest.raises(DefinitionError, match="executors, which cannot see"):
        check_readable(url)
