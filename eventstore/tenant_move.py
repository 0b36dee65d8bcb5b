"""A tenant moved: its whole log copied from its place under one resolver to its place
under another (a SQLite file to a PostgreSQL schema, one database to another), through
the stores' public calls, so any two places a store can open will do.

**What is copied.** Every event with its id, stream, version, type, data, metadata,
tags and recorded time, in the order of the source's log; each stream's deletion (soft
or tombstone) where it stands in the log, at its time; each stream's newest snapshot.
Positions are the destination's own: `PositionMap` says where each event is now, which
is what a checkpoint needs to be carried (`projections.carry_checkpoints`). The copy is
the export's lines fed to the import (`transfer.py`), so a move keeps what a copy keeps.

**Personal data.** The source is read as stored (`sealed=True`), and each sealed field
is opened with the source's keys and sealed again with the destination's, keys made
there for its subjects: the copy stays erasable (`forget` at the destination reaches
it), and no key is carried in the clear. A subject forgotten at the source stays
forgotten: its fields are copied as a reader of the source sees them (`FORGOTTEN`).

**Refused, nothing written.** A destination at the source's place; a source whose early
events retention removed (its archive holds them: the copy could not begin at 1); a
destination whose log is not a part of this very copy (`InvalidTenant` for each).

**A move stopped part-way resumes.** The destination holding the beginning of the
source's log, event for event by id, is an earlier move of the same log that stopped
(a crash, a kill): a move run again goes on from there, writing nothing twice, and
says so (`TenantMove.resumed`). So is a move run again after the source took more
events: copy while the tenant is served, stop what writes to it, move again for the
rest, then carry the checkpoints.
"""

from __future__ import annotations

import io
import os
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from .arguments import redacted
from .backends import scheme_of
from .errors import InvalidEvent, InvalidTenant
from .import_file import Progress
from .personal.envelope import MARK, TEXT_MARK, opened, seal
from .personal.fields import FORGOTTEN, PersonalField
from .personal.keys import KeyStore
from .sqlite.options import PREFIX as SQLITE_PREFIX
from .store import EventStore
from .tenant_places import Resolver, TenantPlaces, exists
from .tenants import Tenants
from .transfer import export_lines, import_log


def _nothing(done: int) -> None:
    """A `Progress` that shows nothing."""


@dataclass(frozen=True)
class PositionMap:
    """Where each event of a moved log is now: its position in the source's log, and in
    the destination's. Both go up together: the copy keeps the log's order.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, move_tenant_log

        with EventStore.open("sqlite:///old.db") as old, EventStore.open("sqlite:///new.db") as new:
            old.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            positions = move_tenant_log(old, new).positions
        assert list(positions.pairs()) == [(1, 1), (2, 2)]
        assert positions.new_position(2) == 2 and positions.new_position(0) == 0
    """

    source: str
    """The log the old positions are of (its place: server, database and schema, or file)."""
    destination: str
    """The log the new positions are of."""
    until: int
    """The source's position the copy went up to: its high-water mark when it began."""
    _old: array[int] = field(repr=False)
    _new: array[int] = field(repr=False)

    def new_position(self, old: int) -> int:
        """Where a reader that has read the source's log up to `old` stands in the
        destination's: the new position of the last event at or before `old`, 0 if there
        is none. `InvalidEvent` for a position past the copy (`until`): events after it
        were not copied, so no place in the destination stands for it."""
        if isinstance(old, bool) or not isinstance(old, int) or old < 0:
            raise InvalidEvent(f"a position is a whole number from 0, not {old!r}")
        if old > self.until:
            raise InvalidEvent(
                f"position {old} is past the copy, which went up to position {self.until} "
                "of the source: move the tenant again (it copies what came since), then "
                "carry the checkpoints"
            )
        at = bisect_right(self._old, old)
        return self._new[at - 1] if at else 0

    def pairs(self) -> Iterator[tuple[int, int]]:
        """Each copied event's (old position, new position), in log order."""
        return zip(self._old, self._new, strict=True)

    def __len__(self) -> int:
        return len(self._old)


@dataclass(frozen=True)
class TenantMove:
    """What moving a tenant's log did.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, move_tenant_log

        with EventStore.open("sqlite:///old.db") as old, EventStore.open("sqlite:///new.db") as new:
            old.append("order-1", [NewEvent("Placed", {})])
            old.save_snapshot("order-1", version=1, type="Order", data={"placed": True})
            first, again = move_tenant_log(old, new), move_tenant_log(old, new)
        assert (first.events, first.written, first.snapshots, first.resumed) == (1, 1, 1, False)
        assert (again.events, again.written, again.resumed) == (1, 0, True)  # nothing twice
    """

    tenant: str | None
    """The tenant moved (None for stores of no tenant)."""
    events: int
    """Events in the destination's log, each the copy of the source's event at its place."""
    written: int
    """Events this run appended (the rest were there: an earlier run copied them)."""
    resumed: bool
    """Whether the destination held part of the copy already (an earlier run stopped, or
    the source took more events since), and this run went on from there."""
    deletions: int
    """Stream deletions this run applied."""
    snapshots: int
    """Snapshots copied (each stream's newest)."""
    resealed: int
    """Events and snapshots whose personal fields were sealed again with the destination's
    keys."""
    positions: PositionMap
    """Each event's old position and its new one: what carries a checkpoint."""


def move_tenant(
    tenant: str,
    source: Resolver,
    destination: Resolver,
    *,
    progress: Progress = _nothing,
) -> TenantMove:
    """Copy `tenant`'s whole log from its place under `source` to its place under
    `destination` (each a URL template with `{tenant}`, or a function from a tenant id to
    a URL, as `Tenants` takes), its positions renumbered there (`move_tenant_log`). The
    source is left as it was: drop it (`drop_tenant`) once what reads it follows the
    destination.

    `InvalidTenant` (nothing written) for a tenant id the store refuses, a tenant with no
    store under `source`, or a destination place that is the source's or holds another
    log. `progress` is told the bytes of the log copied so far, now and then.

    Example::

        from pathlib import Path

        from eventcraft.eventstore import EventStore, NewEvent, Tenants, move_tenant

        Path("old").mkdir(exist_ok=True)
        Path("new").mkdir(exist_ok=True)
        with Tenants("sqlite:///old/{tenant}.db") as tenants:
            tenants.for_tenant("acme").append("order-1", [NewEvent("Placed", {"cents": 5})])
        moved = move_tenant("acme", "sqlite:///old/{tenant}.db", "sqlite:///new/{tenant}.db")
        assert (moved.tenant, moved.events, list(moved.positions.pairs())) == ("acme", 1, [(1, 1)])
        with EventStore.open("sqlite:///new/{tenant}.db?tenant=acme") as acme:
            assert [event.data for event in acme.read_all()] == [{"cents": 5}]
    """
    # Places are checked before anything is opened: a hostile id, or a template that cannot
    # place every tenant, is refused here.
    from_place = TenantPlaces(source).place(tenant)
    to_place = TenantPlaces(destination).place(tenant)
    if from_place.where == to_place.where:
        raise InvalidTenant(
            f"tenant {tenant!r} is at {from_place.kind} {from_place.name} under both: a move "
            "goes from one place to another"
        )
    if from_place.kind == "memory":
        raise InvalidTenant(
            "a memory:// tenant lives in the Tenants holding it: move it with "
            "move_tenant_log(tenants.for_tenant(tenant), destination)"
        )
    if not exists(from_place):
        raise InvalidTenant(
            f"tenant {tenant!r} has no store at {from_place.kind} {from_place.name}: "
            "there is nothing to move"
        )
    with (
        Tenants(source, most_open=1, pool_size=1) as sources,
        Tenants(destination, most_open=1, pool_size=1) as destinations,
    ):
        return move_tenant_log(
            sources.for_tenant(tenant), destinations.for_tenant(tenant), progress=progress
        )


def move_tenant_log(
    source: EventStore, destination: EventStore, *, progress: Progress = _nothing
) -> TenantMove:
    """Copy the whole log of `source` into `destination`, which holds nothing of another
    log, and say where each event is now (`TenantMove.positions`). See `tenant_move.py`
    for what is copied and refused; `progress` is told the bytes of the log copied so far,
    now and then.

    Run again after it stopped part-way (a crash), it resumes where the destination's
    log ends; run again after it completed, it writes nothing.

    Example::

        from eventcraft.eventstore import EventStore, InvalidTenant, NewEvent, move_tenant_log

        with EventStore.open("sqlite:///old.db") as old, EventStore.open("sqlite:///new.db") as new:
            old.append("order-1", [NewEvent("Placed", {})])
            new.append("cart-9", [NewEvent("ItemAdded", {})])  # another log's event
            try:
                move_tenant_log(old, new)
            except InvalidTenant as error:
                assert "holds events that are not the source's" in str(error)
            assert new.stream_version("order-1") == 0  # nothing was written
    """
    named_source, named_destination = _log_of(source), _log_of(destination)
    tenants = {source.tenant, destination.tenant}
    if _place_of(source) == _place_of(destination) and (len(tenants) == 1 or None in tenants):
        raise InvalidTenant(
            f"{redacted(source.url)!r} and {redacted(destination.url)!r} are one place: a "
            "move goes from one place to another"
        )
    if source.low_water_mark() > 0:
        raise InvalidTenant(
            f"retention removed the early events of {redacted(source.url)!r} (they are in "
            "its archive): a moved log must begin at its first event, so this one cannot "
            "be moved as a copy"
        )
    until = source.high_water_mark()
    with ExitStack() as stack:
        stored = stack.enter_context(_as_stored(source))
        held, resume_after = _held(stored, destination, until)
        holds_keys = _holds_keys(source)
        if holds_keys and stored is source:
            raise InvalidTenant(
                "a memory store's sealed personal fields cannot be read as stored: move its "
                "log from a store in a file or a database"
            )
        seals = _Reseal(source.keys, destination.keys) if holds_keys else None
        lines = _BytesOf(_copied_lines(stored, resume_after, until, seals))
        report = import_log(destination, io.BufferedReader(lines), progress=progress, check=False)
        snapshots = _copy_snapshots(stored, destination, seals)
        positions = _positions(stored, destination, until, named_source, named_destination)
    return TenantMove(
        tenant=source.tenant,
        events=len(positions),
        written=report.written,
        resumed=held > 0,
        deletions=report.deletions,
        snapshots=snapshots,
        resealed=(seals.resealed if seals is not None else 0),
        positions=positions,
    )


@contextmanager
def _as_stored(store: EventStore) -> Iterator[EventStore]:
    """`store` opened again to read its personal fields as stored (sealed); a memory
    store, which no other opening reaches, as it is."""
    if scheme_of(store.url) == "memory":
        yield store
        return
    with EventStore.open(store.url, group_commit=False, sealed=True) as stored:
        yield stored


def _holds_keys(store: EventStore) -> bool:
    """Whether anything of `store` was ever sealed (its key store holds or held a key)."""
    return store.keys.holds_keys()


def _held(source: EventStore, destination: EventStore, until: int) -> tuple[int, int]:
    """How many events the destination holds, each the source's at its place in the log,
    and the source position the copy goes on after: before the last event held, whose
    deletion (placed after it) an earlier run may not have applied. `InvalidTenant` for a
    destination holding anything else."""
    count = 0
    last_two = [0, 0]  # the source positions of the last two events held
    theirs = iter(source.read_all_encoded(until=until))
    for event in destination.read_all_encoded():
        mine = next(theirs, None)
        if mine is None or mine.id != event.id:
            raise InvalidTenant(
                f"{redacted(destination.url)!r} holds events that are not the source's "
                f"(event {event.id} of {event.stream_id!r} at position {event.position}"
                + (
                    ""
                    if mine is None
                    else f", where the source's log has {mine.id} of {mine.stream_id!r}"
                )
                + "): a tenant moves into an empty place, or one an earlier move of the same "
                "log left part-way; nothing was written"
            )
        count += 1
        last_two = [last_two[1], mine.position]
    if count == 0:
        _check_no_deletions(destination)
    return count, last_two[0]


def _check_no_deletions(destination: EventStore) -> None:
    """A destination with no event holds no deletion either, but for one a move made before
    the source's first event (placed at 0): then it is the copy's."""
    if any(position > 0 for position, _ in destination.placed_deletions()):
        raise InvalidTenant(
            f"{redacted(destination.url)!r} holds deleted streams of another log: a tenant "
            "moves into an empty place; nothing was written"
        )


def _copied_lines(
    source: EventStore, after: int, until: int, seals: _Reseal | None
) -> Iterator[bytes]:
    """The export's lines of the source's log after `after` up to `until`, their personal
    fields sealed again with the destination's keys."""
    for text, _, _ in export_lines(source, after=after, until=until):
        if seals is None or TEXT_MARK not in text:
            yield text.encode()
            continue
        # A line ends at a newline only: JSON keeps U+2028 raw, where splitlines would cut.
        yield "\n".join(
            seals.line(line) if TEXT_MARK in line else line for line in text.split("\n")
        ).encode()


def _copy_snapshots(source: EventStore, destination: EventStore, seals: _Reseal | None) -> int:
    """Each stream's newest snapshot, saved at the destination (its `recorded_at` is the
    copy's: a snapshot keeps no time of its own to be given)."""
    copied = 0
    for stream in source.list_streams():
        snapshot = source.load_snapshot(stream.stream_id)
        if snapshot is None:
            continue
        data = snapshot.data
        if seals is not None and MARK in data:
            data = seals.data(data, f"the snapshot of {snapshot.stream_id!r}")
        try:
            destination.save_snapshot(
                snapshot.stream_id,
                version=snapshot.version,
                type=snapshot.type,
                data=data,
                schema_version=snapshot.schema_version,
            )
        except InvalidEvent:
            # A snapshot of events after the copy (the source took more since it began):
            # the next move copies both.
            if destination.stream_version(snapshot.stream_id) >= snapshot.version:
                raise
            continue
        copied += 1
    return copied


def _positions(
    source: EventStore, destination: EventStore, until: int, named_source: str, named: str
) -> PositionMap:
    """The two logs read side by side: each event's old and new position. Their ids must
    agree event for event (the copy is checked whole here)."""
    old, new = array("q"), array("q")
    copied = iter(destination.read_all_encoded())
    for mine in source.read_all_encoded(until=until):
        theirs = next(copied, None)
        if theirs is None or theirs.id != mine.id:
            raise InvalidTenant(
                f"the copy in {redacted(destination.url)!r} does not hold event {mine.id} "
                f"(position {mine.position} of the source) where the source's log has it: "
                "another writer wrote to the destination during the move; stop it, drop the "
                "destination's tenant and move again"
            )
        old.append(mine.position)
        new.append(theirs.position)
    extra = next(copied, None)
    if extra is not None:
        raise InvalidTenant(
            f"{redacted(destination.url)!r} holds event {extra.id} after the copy: another "
            "writer wrote to the destination during the move"
        )
    return PositionMap(named_source, named, until, old, new)


class _Reseal:
    """Sealed personal fields opened with the source's keys and sealed again with the
    destination's, for each copied line and snapshot."""

    def __init__(self, source_keys: KeyStore, destination_keys: KeyStore) -> None:
        self._source = source_keys
        self._destination = destination_keys
        self.resealed = 0

    def line(self, line: str) -> str:
        document = orjson.loads(line)
        data = document.get("data")
        if not isinstance(data, dict) or MARK not in data:
            return line
        where = f"event {document.get('id')} of {document.get('stream_id')!r}"
        document["data"] = self.data(data, where)
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS).decode()

    def data(self, data: dict[str, Any], where: str) -> dict[str, Any]:
        entries = data[MARK]
        key_ids = [entry["key"] for entry in entries]
        ciphers = self._source.opening(key_ids)
        plain = opened(data, ciphers, lambda: where)
        groups: dict[str, list[PersonalField]] = {}
        for entry in entries:
            if ciphers.get(entry["key"]) is None:
                continue  # forgotten: the copy holds what a reader of the source sees
            odd = entry.get("forgotten") or {}
            fields = groups.setdefault(entry["subject"], [])
            fields.extend(
                PersonalField(name, entry["subject"], odd.get(name, FORGOTTEN))
                for name in entry["fields"]
            )
        self.resealed += 1
        if not groups:
            return plain
        return seal(plain, groups, self._destination.sealing(list(groups)))


class _BytesOf(io.RawIOBase):
    """The bytes of `chunks` as a file to read: what the import takes."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size


def _log_of(store: EventStore) -> str:
    """Which log `store` holds, as a name two openings of it share: the place (the server,
    database and schema, or the file's absolute path, case folded; a memory store is its
    own) and the tenant, whose log it is (two tenants side by side in one database keep
    two logs)."""
    tenant = f"#tenant={store.tenant}" if store.tenant is not None else ""
    return _place_of(store) + tenant


def _place_of(store: EventStore) -> str:
    url = store.url
    kind = scheme_of(url)
    if kind == "memory":
        return f"memory:{id(store)}"
    if kind == "sqlite" and url.startswith(SQLITE_PREFIX):
        path = url[len(SQLITE_PREFIX) :].partition("?")[0]
        return "sqlite:" + os.path.normcase(os.path.abspath(path)).casefold()
    if kind == "postgresql":
        # Read here, not by PostgresTarget: a place of tenants side by side has no schema of
        # a tenant's own to give, and is named by its schema and `tenancy` all the same.
        parts = urlsplit(url)
        options = dict(parse_qsl(parts.query))
        return (
            f"postgresql://{parts.hostname or ''}:{parts.port or 5432}{parts.path}"
            f"?schema={options.get('schema', '')}&tenancy={options.get('tenancy', '')}"
        )
    other = urlsplit(url)  # another backend's: its place, its options sorted
    return f"{kind}://{other.hostname or ''}{other.path}?{sorted(parse_qsl(other.query))}"
