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
    """The partition of `stream_id` among `count`: the same in every process and version.

    Example::

        from eventcraft.projections import partition_of

        streams = [f"order-{n}" for n in range(100)]
        shares = [partition_of(stream, 4) for stream in streams]
        assert set(shares) == {0, 1, 2, 3}  # streams spread over the four
        assert partition_of("order-7", 4) == shares[7]  # the same in every process, every time
    """
    digest = hashlib.blake2b(stream_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


@dataclass(frozen=True)
class Partition:
    """Partition `index` of `count` (from 0).

    Example::

        from eventcraft.projections import Partition, partition_of

        partitions = Partition.all(4)
        assert [p.name_of("labels") for p in partitions[:2]] == ["labels.p0of4", "labels.p1of4"]
        owners = [p for p in partitions if p.owns("order-42")]  # each stream has one partition
        assert owners == [Partition(partition_of("order-42", 4), 4)]
    """

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
    """One partition's share of a subscription: its streams only, its own checkpoint.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import (
            Partition, PartitionSubscription, Subscription, partition_of,
        )

        labels = []
        printing = Subscription("labels", lambda event: labels.append(event.stream_id))
        first_half = PartitionSubscription(printing, Partition(0, 2))  # its own checkpoint
        assert first_half.name == "labels.p0of2"
        with EventStore.open("memory://") as store:
            for n in range(6):
                store.append(f"order-{n}", [NewEvent("OrderShipped", {})])
            for event in store.read_all():
                first_half.deliver(event)  # what a runner does: only partition 0's streams pass
        assert labels == [f"order-{n}" for n in range(6) if partition_of(f"order-{n}", 2) == 0]
    """

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

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import (
            Partition, PartitionedRunner, PartitionProjection, Projection,
        )

        shipped = sa.Table("shipped", sa.MetaData(), sa.Column("stream", sa.Text, primary_key=True))
        shipments = Projection("shipments", tables=[shipped])  # each stream writes its own row
        shipments.on("OrderShipped")(lambda read_model, event: read_model.execute(
            sa.insert(read_model[shipped]).values(stream=event.stream_id)))
        share = PartitionProjection(shipments, Partition(1, 2))  # for_projection makes these
        assert (share.name, share.types) == ("shipments.p1of2", ("OrderShipped",))
        store = EventStore.open("sqlite:///shop.db")
        for n in range(4):
            store.append(f"order-{n}", [NewEvent("OrderShipped", {})])
        with PartitionedRunner.for_projection(store, shipments, partitions=2) as runner:
            runner.step()  # alone in its group: it works both partitions
            with runner.database.reading() as connection:
                assert len(connection.execute(sa.select(shipped)).all()) == 4
        store.close()
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
