"""A schema per tenant on PostgreSQL beside one store of no tenant:
`python -m benchmarks.tenancy [--tenants 100 --most-open 10 --rounds 5]`.

`--tenants` tenants (100), each in a schema of its own through one `Tenants`
(`most_open` stores open at once, `pool_size` connections each), beside one
untenanted store (the default pool of 10) holding as many events as all of them.
Interleaved round by round, the order of the two swapped each round:

- appends, `--threads` threads (8) appending single events: to the untenanted store,
  and to `--active` tenants (10) drawn anew each round, their stores open (the common
  case: the tenants at work at once fit in `most_open`);
- appends to every tenant, at random: with more tenants at work than
  `most_open`, most calls must first close an idle store and open another (the cost of
  the bound when it is too small);
- reads: a tenant's whole log (`--events`, 1,000) read by `read_all`, against as many
  events of the untenanted store's log, from a random place in it.

Prints events/s (medians over rounds), each ratio (the median of the rounds' ratios:
a round slowed by another user of the machine slows both sides of it), what opening a
tenant's store costs (its schema made, then opened again), and the most connections the
server saw of each side (`pg_stat_activity`, by application name, sampled throughout)
beside the bound `most_connections`. `--json PATH` writes the record (`record.py`).

`--side-by-side [--sizes 1,100,10000 --total 1000000]` measures tenants side by side
(`tenancy=shared`) instead: for each size, that many tenants in one schema's tables
holding `--total` events between them, beside an untenanted store holding the same
events (both filled by SQL, the same rows but for the tenant column), interleaved round
by round:

- appends, `--threads` threads appending single events: to the untenanted store, to one
  tenant (one store, as the untenanted: group commit shares its transactions alike), and
  to `--active` tenants (or all of them, if fewer) drawn anew each round, their stores
  open (a store each: the threads' appends spread over them share fewer transactions);
- groups on the server: `GROUP` single-event appends a call of the group function, sent on a
  connection of its own with `synchronous_commit` off (what the placement costs the
  server, without the commits' flushes or the client), to the untenanted store and to one
  tenant;
- catch-up: a tenant's whole log read by `read_all` (`--total` / size events; at least
  the first 20,000 of it), against as many events of the untenanted log from a random
  place in it.

Prints events/s (medians) and each ratio side by side / untenanted (the median of the
rounds' ratios). `--as-role` makes and uses the side-by-side tables as a role of the
benchmark's own, no superuser, so that row-level security holds its statements (a
superuser, and so a layout a superuser owns, passes every policy).
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import orjson
import psycopg
from eventcraft.eventstore import EventStore, NewEvent, PostgresTarget, Tenants
from eventcraft.eventstore.postgres.side_by_side import side_by_side as side_by_side_of

from .contenders import NOTE, PG, payload
from .record import Record

BASE = "bench-tenancy-base"
TENANTS = "bench-tenancy-tenants"
"""The application names the two sides' connections carry, to be counted apart."""


class Peak:
    """The most connections of each application name the server shows, sampled until
    stopped, from a connection of its own."""

    def __init__(self) -> None:
        self.most: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        with psycopg.connect(PG, autocommit=True, application_name="bench-tenancy-peak") as conn:
            while not self._stop.is_set():
                for name, count in conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE application_name = ANY(%s) GROUP BY 1",
                    ([BASE, TENANTS],),
                ).fetchall():
                    self.most[name] = max(self.most[name], count)
                self._stop.wait(0.01)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def timed(threads: int, calls: list[Callable[[], object]], warm: list[EventStore]) -> float:
    """Calls per second of `calls` made by `threads` threads, in turn, once the stores of
    `warm` are open (what opening costs is measured apart)."""
    for store in warm:
        store.high_water_mark()
    shares = [calls[n::threads] for n in range(threads)]
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for done in [pool.submit(_each, share) for share in shares]:
            done.result()
    return len(calls) / (time.perf_counter() - started)


def _each(calls: list[Callable[[], object]]) -> None:
    for call in calls:
        call()


def appends(
    store_of: Callable[[int], EventStore], names: list[int], count: int
) -> list[Callable[[], object]]:
    """`count` appends of one event, each to the store of a name drawn from `names`."""
    draw = random.Random(count)
    chosen = [draw.choice(names) for _ in range(count)]
    return [functools.partial(_append_one, store_of, name, n) for n, name in enumerate(chosen)]


def _append_one(store_of: Callable[[int], EventStore], name: int, n: int) -> object:
    return store_of(name).append(f"order-{n % 50}", [NewEvent("Deposited", payload(n))])


def reads(store: EventStore, after: int, events: int) -> float:
    """Events per second of `read_all` over `events` events after `after`, once the store
    is open."""
    store.high_water_mark()
    started = time.perf_counter()
    read = sum(1 for _ in store.read_all(after=after, limit=events))
    assert read == events, (read, events)
    return events / (time.perf_counter() - started)


def _cases(
    options: argparse.Namespace,
    base: EventStore,
    tenants: Tenants,
    names: list[str],
    head: int,
    draw: random.Random,
) -> list[tuple[str, Callable[[], float]]]:
    """One round's cases: each a name and what it runs, giving events/s."""
    active = draw.sample(range(len(names)), options.active)
    every = list(range(len(names)))
    threads, count, events = options.threads, options.appends, options.events

    def tenant(n: int) -> EventStore:
        return tenants.for_tenant(names[n])

    def untenanted(_: int) -> EventStore:
        return base

    start = draw.randrange(head - events)
    reader = tenant(draw.choice(active))
    return [
        ("appends, untenanted", lambda: timed(threads, appends(untenanted, [0], count), [])),
        (
            "appends, active tenants",
            lambda: timed(threads, appends(tenant, active, count), [tenant(n) for n in active]),
        ),
        ("appends, every tenant", lambda: timed(threads, appends(tenant, every, count // 4), [])),
        ("reads, untenanted", lambda: reads(base, start, events)),
        ("reads, a tenant's log", lambda: reads(reader, 0, events)),
    ]


GROUP = 8
"""Appends a call of the group function in the groups-on-the-server cases."""
GROUPS = 100
"""Calls a groups-on-the-server case makes."""
CATCH_UP_MOST = 20_000
"""The most events a catch-up case reads (of one tenant's log, or of the untenanted)."""


def _fill(conn: psycopg.Connection[object], table: str, per: int, tenants: list[str]) -> None:
    """Rows of `per` events for each of `tenants` (none: the untenanted store's, one log of
    them all) in the events table `table` (schema-qualified), 100 a stream, the data the
    appends' `payload`; and each stream's row in its streams table."""
    schema = table.rpartition(".")[0]
    data = f"jsonb_build_object('amount_cents', p, 'currency', 'EUR', 'note', '{NOTE}')"
    if tenants:
        conn.execute(
            f"INSERT INTO {schema}.eventcraft_tenants (tenant) "
            "SELECT t FROM unnest(%s::text[]) AS t ON CONFLICT (tenant) DO NOTHING",
            (tenants,),
        )
        conn.execute(
            f"INSERT INTO {table} (tenant, position, recorded_at, id, version, stream_id, type, "
            f"category, data, metadata) SELECT t, p, now(), gen_random_uuid(), "
            f"mod(p - 1, 100) + 1, 'order-' || ((p - 1) / 100), 'Deposited', 'order', {data}, "
            "'{}' FROM unnest(%s::text[]) AS t, generate_series(1, %s) AS p",
            (tenants, per),
        )
        conn.execute(
            f"INSERT INTO {schema}.eventcraft_streams (tenant, stream_id, category) "
            "SELECT DISTINCT tenant, stream_id, 'order' FROM " + table
        )
    else:
        conn.execute(
            f"INSERT INTO {table} (position, recorded_at, id, version, stream_id, type, "
            f"category, data, metadata) SELECT p, now(), gen_random_uuid(), "
            f"mod(p - 1, 100) + 1, 'order-' || ((p - 1) / 100), 'Deposited', 'order', {data}, "
            "'{}' FROM generate_series(1, %s) AS p",
            (per,),
        )
        conn.execute(
            f"INSERT INTO {schema}.eventcraft_streams (stream_id, category) "
            "SELECT DISTINCT stream_id, 'order' FROM " + table
        )
        conn.execute(f"SELECT setval('{schema}.eventcraft_position_seq', %s)", (per,))
    conn.execute(f"ANALYZE {table}")


def groups(target: PostgresTarget, first: int) -> float:
    """Events per second of `GROUPS` calls of the group function, `GROUP` single-event
    appends each, on a connection of its own to `target` (`synchronous_commit` off)."""
    with psycopg.connect(target.conninfo, **target.connect_arguments(), autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        calls = [
            orjson.dumps(
                [
                    [[f"order-{(first + n) % 50}", "order", -1, [_event(first + g * GROUP + n)]]]
                    for n in range(GROUP)
                ]
            ).decode()
            for g in range(GROUPS)
        ]
        started = time.perf_counter()
        for members in calls:
            conn.execute("SELECT eventcraft_append_group(%s, NULL)", (members,))
        return GROUPS * GROUP / (time.perf_counter() - started)


def _event(n: int) -> dict[str, object]:
    return {"id": str(uuid.uuid4()), "type": "Deposited", "data": payload(n), "metadata": {}}


def _side_cases(
    options: argparse.Namespace,
    base: EventStore,
    shown: list[EventStore],
    reader: EventStore,
    start: int,
    read: int,
    targets: tuple[PostgresTarget, PostgresTarget],
) -> list[tuple[str, Callable[[], float]]]:
    """One round's side-by-side cases: each a name and what it runs, giving events/s."""
    threads, count = options.threads, options.appends
    first = random.randrange(1 << 30)

    def tenant(n: int) -> EventStore:
        return shown[n]

    def untenanted(_: int) -> EventStore:
        return base

    every = list(range(len(shown)))
    return [
        ("appends, untenanted", lambda: timed(threads, appends(untenanted, [0], count), [])),
        ("appends, one tenant", lambda: timed(threads, appends(tenant, [0], count), shown[:1])),
        ("appends, active tenants", lambda: timed(threads, appends(tenant, every, count), shown)),
        ("groups on the server, untenanted", lambda: groups(targets[0], first)),
        ("groups on the server, a tenant", lambda: groups(targets[1], first)),
        ("catch-up, untenanted", lambda: reads(base, start, read)),
        ("catch-up, a tenant", lambda: reads(reader, 0, read)),
    ]


def side_by_side(options: argparse.Namespace) -> None:
    """The side-by-side measure (`--side-by-side`): see the module's docstring."""
    record = Record("tenancy-side-by-side", options, postgres=PG)
    separator = "&" if "?" in PG else "?"
    sizes = [int(size) for size in options.sizes.split(",")]
    results: dict[str, dict[str, object]] = {}
    for size in sizes:
        prefix = f"bs_{uuid.uuid4().hex[:8]}"
        base_url = f"{PG}{separator}schema={prefix}_base&application_name={BASE}"
        shared = f"{PG}{separator}schema={prefix}&tenancy=shared&application_name={TENANTS}"
        if options.as_role:
            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f"CREATE ROLE {prefix} LOGIN")
                for schema in (prefix, f"{prefix}__rows"):
                    conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION {prefix}')
            parts = urlsplit(shared)
            shared = urlunsplit(
                parts._replace(netloc=f"{prefix}@{parts.netloc.rpartition('@')[2]}")
            )
        names = [f"t{n:05d}" for n in range(size)]
        per = options.total // size
        rates: dict[str, list[float]] = defaultdict(list)
        try:
            with (
                EventStore.open(base_url) as base,
                Tenants(shared, most_open=max(options.active, 2), pool_size=2) as tenants,
            ):
                tenants.for_tenant("made").high_water_mark()  # the tables made
                started = time.perf_counter()
                with psycopg.connect(PG, autocommit=True) as conn:
                    _fill(conn, f"{prefix}_base.eventcraft_events", per * size, [])
                    _fill(conn, f'"{prefix}__rows".eventcraft_events', per, names)
                filled = time.perf_counter() - started
                head = base.high_water_mark()
                read = min(per, CATCH_UP_MOST)
                tenant_place = side_by_side_of(f"{shared}&tenant={names[0]}")
                assert tenant_place is not None
                targets = (PostgresTarget.from_url(base_url), tenant_place.target)
                for round_ in range(options.rounds):
                    draw = random.Random(round_)
                    active = draw.sample(range(size), min(options.active, size))
                    shown = [tenants.for_tenant(names[n]) for n in active]
                    reader = tenants.for_tenant(names[draw.choice(active)])
                    start = draw.randrange(max(head - read, 1))
                    cases = _side_cases(options, base, shown, reader, start, read, targets)
                    for case, run in cases if round_ % 2 == 0 else cases[::-1]:
                        rates[case].append(run())
                    print(
                        f"{size} tenants, round {round_ + 1}: "
                        + ", ".join(f"{case} {rates[case][-1]:,.0f}/s" for case, _ in cases)
                    )
        finally:
            with psycopg.connect(PG, autocommit=True) as conn:
                for schema in (prefix, f"{prefix}__rows", f"{prefix}_base"):
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                conn.execute(f"DROP ROLE IF EXISTS {prefix}")

        def ratio(ours: str, reference: str, rates: dict[str, list[float]] = rates) -> float:
            pairs = zip(rates[ours], rates[reference], strict=True)
            return statistics.median(a / b for a, b in pairs)

        results[str(size)] = {
            "events a tenant": per,
            "filled s": filled,
            "rates": {case: statistics.median(values) for case, values in rates.items()},
            "ratios": {
                "appends, one tenant": ratio("appends, one tenant", "appends, untenanted"),
                "appends, active tenants": ratio("appends, active tenants", "appends, untenanted"),
                "groups on the server, a tenant": ratio(
                    "groups on the server, a tenant", "groups on the server, untenanted"
                ),
                "catch-up": ratio("catch-up, a tenant", "catch-up, untenanted"),
            },
        }
    held = "as a role row-level security holds" if options.as_role else "as the server's user"
    print(
        f"\ntenants side by side, {held}; {options.total:,} events in all; "
        f"{options.threads} threads"
    )
    for tenants_side_by_side, result in results.items():
        medians, ratios = result["rates"], result["ratios"]
        assert isinstance(medians, dict) and isinstance(ratios, dict)
        print(f"  {tenants_side_by_side} tenants ({result['events a tenant']:,} events each):")
        for case, rate in medians.items():
            print(f"    {case:<34} {rate:>10,.0f} events/s")
        for name, value in ratios.items():
            print(f"    {name + ' / untenanted':<48} {value:5.2f}")
    if options.json is not None:
        record.write(options.json, results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--most-open", type=int, default=10)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--active", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--appends", type=int, default=2000, help="appends a round, each case")
    parser.add_argument("--events", type=int, default=1000, help="events in each tenant's log")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--side-by-side", action="store_true", help="tenancy=shared instead")
    parser.add_argument("--sizes", default="1,100,10000", help="side by side: tenants, each")
    parser.add_argument("--total", type=int, default=1_000_000, help="side by side: events")
    parser.add_argument("--as-role", action="store_true", help="side by side: under RLS")
    options = parser.parse_args()
    if options.side_by_side:
        side_by_side(options)
        return
    record = Record("tenancy", options, postgres=PG)
    prefix = f"bt_{uuid.uuid4().hex[:8]}"  # 11 characters: a tenant id of 48 still fits
    separator = "&" if "?" in PG else "?"
    base_url = f"{PG}{separator}schema={prefix}&application_name={BASE}"
    template = f"{PG}{separator}schema={prefix}_{{tenant}}&application_name={TENANTS}"
    names = [f"t{n:03d}" for n in range(options.tenants)]
    rates: dict[str, list[float]] = defaultdict(list)
    try:
        with (
            Peak() as peak,
            EventStore.open(base_url) as base,
            Tenants(template, most_open=options.most_open, pool_size=options.pool_size) as tenants,
        ):
            # A tenant's store on first use makes its schema; later it only opens.
            started = time.perf_counter()
            for name in names:
                tenants.for_tenant(name).append("order-0", [NewEvent("Opened", {})])
            made = (time.perf_counter() - started) / len(names)
            fill = 500
            for name in names:
                store = tenants.for_tenant(name)
                for n in range(0, options.events - 1, fill):
                    size = min(fill, options.events - 1 - n)
                    store.append(
                        "order-1", [NewEvent("Deposited", payload(n + i)) for i in range(size)]
                    )
                    base.append(
                        f"order-{name}",
                        [NewEvent("Deposited", payload(n + i)) for i in range(size)],
                    )
            base.append("order-0", [NewEvent("Opened", {})])
            started = time.perf_counter()
            for name in names[: options.most_open + 1]:  # past the bound: each one opens
                tenants.for_tenant(name).high_water_mark()
            reopened = (time.perf_counter() - started) / (options.most_open + 1)
            head = base.high_water_mark()
            for round_ in range(options.rounds):
                cases = _cases(options, base, tenants, names, head, random.Random(round_))
                for case, run in cases if round_ % 2 == 0 else cases[::-1]:
                    rates[case].append(run())
                shown = ", ".join(f"{case} {rates[case][-1]:,.0f}/s" for case, _ in cases)
                print(f"round {round_ + 1}: {shown}")
        bound = tenants.most_connections
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            for (schema,) in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname = %s OR nspname LIKE %s",
                (prefix, f"{prefix}\\_%"),
            ).fetchall():
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    def ratio(ours: str, reference: str) -> float:
        return statistics.median(a / b for a, b in zip(rates[ours], rates[reference], strict=True))

    results = {
        "rates": {case: statistics.median(values) for case, values in rates.items()},
        "ratios": {
            "appends, active tenants / untenanted": ratio(
                "appends, active tenants", "appends, untenanted"
            ),
            "appends, every tenant / untenanted": ratio(
                "appends, every tenant", "appends, untenanted"
            ),
            "reads, a tenant's log / untenanted": ratio(
                "reads, a tenant's log", "reads, untenanted"
            ),
        },
        "opening ms": {"schema made": made * 1000, "opened again": reopened * 1000},
        "connections": {
            "tenants, most seen": peak.most[TENANTS],
            "tenants, bound": bound,
            "untenanted, most seen": peak.most[BASE],
        },
    }
    print(
        f"\n{options.tenants} tenants, a schema each; most_open={options.most_open}, "
        f"pool_size={options.pool_size}; {options.threads} threads"
    )
    for case, rate in results["rates"].items():
        print(f"  {case:<32} {rate:>10,.0f} events/s")
    for name, value in results["ratios"].items():
        print(f"  {name:<46} {value:5.2f}")
    print(
        f"  a tenant's store: {made * 1000:.0f} ms to make its schema, "
        f"{reopened * 1000:.0f} ms to open again"
    )
    print(
        f"  connections: tenants {peak.most[TENANTS]} at most (bound {bound}), "
        f"untenanted {peak.most[BASE]} at most (pool 10, and its listener)"
    )
    if options.json is not None:
        record.write(options.json, results)


if __name__ == "__main__":
    main()
