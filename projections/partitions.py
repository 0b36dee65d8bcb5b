"""Partitions of the log by stream: what lets competing consumers share one subscription.

A definition split into N partitions becomes N definitions, one per
partition, each reading only the streams whose hash falls in it and keeping
its own checkpoint and lease (`{name}.p{i}of{N}`). All events of a stream
fall in one partition, and a partition is worked by one process at a time,
in log order: each stream's events stay in order, whichever process has it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from eventcraft.eventstore import RecordedEvent

from .definition import Definition
from .errors import DefinitionError
from .projection import Projection
from .read_model import ReadModel
from .subscription import Subscription


def partition_of(stream_id: str, count: int) -> int:
    """The partition of `stream_id` among `count`: the same in every process and version."""
    digest = hashlib.blake2b(stream_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


@dataclass(frozen=True)
class Partition:
    """Partition `index` of `count` (from 0)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        for field, value in (("count", self.count), ("index", self.index)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise DefinitionError(f"a partition's {field} is an int, not {value!r}")
        if not 1 <= self.count <= 1024 or not 0 <= self.index < self.count:
            raise DefinitionError(
                f"a partition is 0 <= index < count <= 1024, not {self.index} of {self.count}"
            )

    def owns(self, stream_id: str) -> bool:
        return partition_of(stream_id, self.count) == self.index

    def name_of(self, name: str) -> str:
        """The checkpoint name of `name`'s share in this partition."""
        return f"{name}.p{self.index}of{self.count}"

    @classmethod
    def all(cls, count: int) -> list[Partition]:
        return [cls(index, count) for index in range(count)]


class PartitionSubscription(Subscription):
    """One partition's share of a subscription: its streams only, its own checkpoint."""

    def __init__(self, subscription: Subscription, partition: Partition) -> None:
        super().__init__(
            partition.name_of(subscription.name),
            subscription.handler,
            categories=subscription.categories,
            types=subscription.types,
            query=subscription.query,
            where=subscription.where,
            on_error=subscription.on_error,
            registry=subscription.registry,
        )
        self.partition = partition

    def deliver(self, event: RecordedEvent) -> None:
        if self.partition.owns(event.stream_id):
            super().deliver(event)


class PartitionProjection(Definition):
    """One partition's share of a projection: its streams' events applied to the shared
    tables, with a checkpoint of its own.

    For read models that allow it: each stream's handlers touch rows no other
    stream's do (or change them in ways that commute), since partitions commit
    side by side. The tables are the projection's own, created once by
    `PartitionedRunner.for_projection`; a partitioned projection is not rebuilt.
    """

    def __init__(self, projection: Projection, partition: Partition) -> None:
        super().__init__(
            partition.name_of(projection.name),
            tables=projection.tables,
            categories=projection.categories,
            query=projection.query,
            on_error=projection.on_error,
            registry=projection.registry,
        )
        self.projection = projection
        self.partition = partition

    @property
    def types(self) -> tuple[str, ...]:
        return self.projection.types

    def apply(self, read_model: ReadModel, events: Sequence[RecordedEvent]) -> None:
        owns = self.partition.owns
        self.projection.apply(read_model, [e for e in events if owns(e.stream_id)])
