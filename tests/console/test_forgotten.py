"""The console shows a forgotten customer's personal fields as forgotten: on the event page,
the stream page, the log, and in every download, never in the clear or sealed."""

from __future__ import annotations

from typing import Annotated

from eventcraft.eventstore import FORGOTTEN, EventStore, NewEvent, Personal
from pydantic import BaseModel

from .conftest import Client


class Registered(BaseModel):
    name: Annotated[str, Personal()]
    plan: str


def test_pages_and_downloads_show_the_replacement(client: Client, shop_store: EventStore) -> None:
    result = shop_store.append(
        "customer-ada", [NewEvent("Registered", Registered(name="Ada Lovelace", plan="gold"))]
    )
    (position,) = result.positions
    console = client()
    assert "Ada Lovelace" in console.get(f"/events/{position}").text
    shop_store.forget("customer-ada")
    pages = [
        console.get(f"/events/{position}").text,
        console.get("/stream?id=customer-ada").text,
        console.get("/log?category=customer").text,
        console.get(f"/events/{position}/download").text,
        console.get("/log.ndjson?category=customer").text,
        console.get("/stream.ndjson?id=customer-ada").text,
    ]
    for page in pages:
        assert "Ada Lovelace" not in page and "$personal" not in page
    shown = [pages[0], *pages[3:]]  # the pages that show the data: the event's, downloads
    assert all(FORGOTTEN in page or "&lt;forgotten&gt;" in page for page in shown)
