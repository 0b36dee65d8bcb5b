"""A domain event holding a value JSON cannot carry is refused as every bad value is:
`InvalidEvent`, naming the event and the field, and nothing is written."""

from __future__ import annotations

import math
from typing import Annotated, Any

import pytest
from eventcraft.domain import DomainEvent, EventRegistry
from eventcraft.eventstore import EventStore, InvalidEvent, Personal
from pydantic import BaseModel

registry = EventRegistry()


class Detail(BaseModel):
    value: object


@registry.event("Noted")
class Noted(DomainEvent):
    note: object = None
    detail: Detail | None = None
    items: tuple[Any, ...] = ()


@registry.event("PersonNoted")
class PersonNoted(DomainEvent):
    name: Annotated[str, Personal()]
    note: object


@pytest.mark.parametrize(
    ("event", "where", "what"),
    [
        (Noted(note=object()), r"\['note'\]", "object"),
        (Noted(note=b"\xff"), r"\['note'\]", "bytes"),
        (Noted(detail=Detail(value=object())), r"\['detail'\]\['value'\]", "object"),
        (Noted(items=(1, object())), r"\['items'\]\[1\]", "object"),
        (PersonNoted(name="Ann", note=object()), r"\['note'\]", "object"),
    ],
    ids=["object", "bytes", "nested", "in-a-list", "beside-personal-data"],
)
def test_a_value_json_cannot_carry_is_invalid_naming_the_event_and_field(
    store: EventStore, event: DomainEvent, where: str, what: str
) -> None:
    store.append("note-1", [registry.to_new_event(Noted(note="first"), {})])
    with pytest.raises(
        InvalidEvent,
        match=rf"event 0 \('\w+'\) for stream 'note-1': data holds {what} at {where}, "
        "which JSON cannot carry",
    ):
        store.append("note-1", [registry.to_new_event(event, {})])
    assert [e.data for e in store.read_stream("note-1")] == [
        {"note": "first", "detail": None, "items": []}
    ]


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=repr)
def test_nan_in_a_field_typed_object_is_refused_not_stored_as_null(
    store: EventStore, value: float
) -> None:
    with pytest.raises(InvalidEvent, match=rf"data holds {value!r} at \['note'\]"):
        store.append("note-1", [registry.to_new_event(Noted(note=value), {})])
    assert list(store.read_all()) == []
