"""The console's saga page shows the traceback of the bug a saga parked on, and offers to
compensate it on an operator's word, confirmed, with a reason, guarded as every action."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import sagas as operations

from ..cli.bug_app import EMAIL, buggy, park_one
from .conftest import LOCAL


@pytest.fixture
def console(store: EventStore) -> Iterator[TestClient]:
    park_one(store)
    with TestClient(create_app(store, buggy, allow_actions=True), base_url=LOCAL) as client:
        yield client


def _form(console: TestClient, path: str) -> dict[str, str]:
    page = console.get(path)
    assert page.status_code == 200, page.text
    fields = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page.text)
    return {name: html.unescape(value) for name, value in fields}


def test_a_saga_parked_on_a_bug_shows_its_traceback_and_is_compensated_with_a_reason(
    console: TestClient, store: EventStore
) -> None:
    page = html.unescape(console.get("/saga?name=ordering&id=b1").text)
    assert f"KeyError: {EMAIL!r}" in page and "in _charge" in page
    assert 'id="saga-traceback"' in page and 'id="saga-compensate"' in page
    fields = _form(console, "/saga/compensate?name=ordering&id=b1")
    missing = console.post("/saga/compensate", data=fields)
    assert missing.status_code == 400 and "needs a reason" in missing.text
    assert (
        console.post("/saga/compensate", data={"name": "ordering", "id": "b1"}).status_code == 403
    )
    done = console.post("/saga/compensate", data={**fields, "note": "order withdrawn"})
    assert "compensate: saga-ordering:b1 is compensated" in html.unescape(done.text)
    assert operations.saga(store, buggy, "ordering", "b1").saga.status == "compensated"
