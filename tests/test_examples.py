"""The README's main command and its code snippets keep working."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from examples import demo

ROOT = Path(__file__).resolve().parent.parent


def test_the_demo_runs_end_to_end_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo.main(tmp_path / "events.db")
    out = capsys.readouterr().out
    assert "passes the overdraft limit of 1000" in out
    assert "Wrong expected version: 4 (stream: 'account-ann', stream version: 5)" in out
    # 2500 + 1200 + 300 - 500 - 700, and the upcast legacy deposit of 12.50
    assert "balance 4050 cents at version 7 (loaded from the snapshot at version 5)" in out
    assert "order-42 is shipped, order-43 is cancelled" in out
    assert "correlation=checkout-42 user=warehouse" in out
    assert "high-water mark: 14" in out
    # The read models, kept live by projections from the same log.
    assert "ann   Ann     4050 cents" in out and "bob   Bob     4200 cents" in out
    assert "bob   shipped    order 42 (2 lines, 1600 cents)" in out
    assert "projection orders-by-customer: checkpoint 16 of 16, lag 0 events" in out
    assert "rebuilt account-balances from 9 events into generation 2, checkpoint 16" in out
    # Order fulfilment as a saga: one completes, one is undone in reverse.
    assert "saga order-42: completed" in out
    assert "saga order-43: compensated because step arrange_shipping failed" in out
    assert "payments was asked: charge {'cents': 1600, 'for_': 'reserve-1'}" in out
    assert "refund {'cents': 1600}" in out
    demo.main(tmp_path / "events.db")  # runs again from an empty log
    assert "high-water mark: 14" in capsys.readouterr().out


def _readme_snippets() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("index", range(len(_readme_snippets())))
def test_a_readme_snippet_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(_readme_snippets()[index], f"README.md snippet {index}", "exec"), {})
