"""The `$personal` envelope: what it keeps in the clear, and what it refuses to open."""

from __future__ import annotations

import base64
import copy
from typing import Annotated, Any

import orjson
import pytest
from eventcraft.eventstore import (
    FORGOTTEN,
    EventStore,
    KeyStore,
    NewEvent,
    Personal,
    UnreadablePersonalData,
)
from eventcraft.eventstore.personal.envelope import MARK, opened, seal
from eventcraft.eventstore.personal.fields import personal_fields
from eventcraft.eventstore.personal.key_table import MemoryKeyTable
from pydantic import BaseModel


class Registered(BaseModel):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]
    age: Annotated[int | None, Personal(subject="customer_id", forgotten=None)]


def _sealed(keys: KeyStore) -> dict[str, Any]:
    fields = personal_fields(Registered)
    data = Registered(customer_id="c1", name="Ada Lovelace", age=36).model_dump(mode="json")
    return seal(data, {"c1": list(fields)}, keys.sealing(["c1"]))


def _where() -> str:
    return "the event"


def test_the_envelope_keeps_only_the_subject_key_and_field_names_in_the_clear() -> None:
    keys = KeyStore(MemoryKeyTable())
    data = _sealed(keys)
    text = orjson.dumps(data)
    assert b"Ada Lovelace" not in text and "age" not in data  # the age only sealed
    (entry,) = data[MARK]
    assert (entry["subject"], entry["fields"], entry["forgotten"]) == (
        "c1",
        ["name", "age"],
        {"age": None},
    )
    assert data["customer_id"] == "c1" and "name" not in data
    ciphers = keys.opening([entry["key"]])
    assert opened(data, ciphers, _where) == {"customer_id": "c1", "name": "Ada Lovelace", "age": 36}
    keys.forget("c1")
    forgotten = opened(data, keys.opening([entry["key"]]), _where)
    assert forgotten == {"customer_id": "c1", "name": FORGOTTEN, "age": None}


def test_an_altered_seal_or_field_list_does_not_open() -> None:
    keys = KeyStore(MemoryKeyTable())
    data = _sealed(keys)
    ciphers = keys.opening([data[MARK][0]["key"]])
    flipped = copy.deepcopy(data)
    secret = bytearray(base64.b64decode(flipped[MARK][0]["sealed"]))
    secret[-1] ^= 1
    flipped[MARK][0]["sealed"] = base64.b64encode(secret).decode()
    renamed = copy.deepcopy(data)
    renamed[MARK][0]["fields"] = ["age", "name"]  # the values would land in each other's place
    for altered in (flipped, renamed):
        with pytest.raises(UnreadablePersonalData, match="was altered"):
            opened(altered, ciphers, _where)


def test_a_store_opened_with_another_key_store_refuses_its_sealed_events(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    with EventStore.open(url) as store:
        store.append(
            "customer-c1", [NewEvent("Registered", Registered(customer_id="c1", name="Ada", age=3))]
        )
    with EventStore.open(url, keys=f"sqlite:///{tmp_path / 'other-keys.db'}") as store:
        with pytest.raises(UnreadablePersonalData, match="never held"):
            list(store.read_all())
        with pytest.raises(UnreadablePersonalData, match="never held"):
            list(store.read_stream_encoded("customer-c1"))
