"""The event store's tests' own fixtures: PgBouncer in front of the test server."""

from tests.pgbouncer import pgbouncer, pgbouncer_url  # noqa: F401  (fixtures)
