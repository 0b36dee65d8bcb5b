"""Spark schemas of pydantic event classes, so typed payloads become struct columns.

Registered event types (a `domain.EventRegistry`, or anything shaped like
one) are decoded on the executors by the registry itself, upcasting old
versions exactly as an aggregate load does, and their JSON is parsed by
Spark into a struct column per type.
"""

from __future__ import annotations

import datetime
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, Protocol

from eventcraft.eventstore import RecordedEvent
from pydantic import BaseModel
from pyspark.sql import types as T

from ..typed_event import EventDecoder


class RegisteredType(Protocol):
    @property
    def cls(self) -> type[BaseModel]: ...


class EventTypes(EventDecoder, Protocol):
    """What `read_events` needs of an event registry (`domain.EventRegistry` fits): an
    `EventDecoder` that names its types.

    Example::

        # needs: spark
        from eventcraft.domain import DomainEvent, EventRegistry
        from eventcraft.eventstore import EventStore
        from eventcraft.projections.spark import (
            LOCAL_SETTINGS, EventTypes, read_events, spark_session,
        )

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount_cents: int

        registry: EventTypes = bank_events  # it decodes events, and names its types and classes
        assert registry.types["MoneyDeposited"].cls is MoneyDeposited
        EventStore.open("sqlite:///bank.db").close()
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        events = read_events(spark, "sqlite:///bank.db", registry=registry)  # a column per type
        column = events.schema["MoneyDeposited"]  # the data decoded, on its rows
        assert column.dataType.simpleString() == "struct<amount_cents:bigint>"
    """

    @property
    def types(self) -> Mapping[str, RegisteredType]: ...

    def decode(self, recorded: RecordedEvent) -> BaseModel: ...


def struct_of(model: type[BaseModel]) -> T.StructType:
    """The Spark schema of `model`'s JSON (its field names, as `model_dump_json` writes)."""
    return T.StructType(
        [
            T.StructField(name, spark_type(field.annotation), nullable=True)
            for name, field in model.model_fields.items()
        ]
    )


def spark_type(annotation: Any) -> T.DataType:
    """A Spark type for a field annotation; JSON text for what has no better one."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Annotated:
        return spark_type(arguments[0])
    if origin in (typing.Union, types.UnionType):
        present = [a for a in arguments if a is not type(None)]
        return spark_type(present[0]) if len(present) == 1 else T.StringType()
    if origin in (list, tuple, set, frozenset):
        items = [a for a in arguments if a is not Ellipsis]
        return T.ArrayType(spark_type(items[0]) if len(set(items)) == 1 else T.StringType())
    if origin is dict and len(arguments) == 2:
        return T.MapType(T.StringType(), spark_type(arguments[1]))
    if isinstance(annotation, type):
        return _scalar(annotation)
    return T.StringType()


def _scalar(cls: type) -> T.DataType:
    if issubclass(cls, BaseModel):
        return struct_of(cls)
    if issubclass(cls, bool):
        return T.BooleanType()
    if issubclass(cls, enum.Enum):
        values = {type(member.value) for member in cls}
        return T.LongType() if values == {int} else T.StringType()
    if issubclass(cls, int):
        return T.LongType()
    if issubclass(cls, float):
        return T.DoubleType()
    if issubclass(cls, datetime.datetime):
        return T.TimestampType()
    if issubclass(cls, datetime.date):
        return T.DateType()
    # str, UUID, Decimal (pydantic writes it as a string, to keep its digits), ...
    return T.StringType()
