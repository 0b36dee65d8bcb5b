"""Where each tenant's store is, when every tenant has a place of its own: a PostgreSQL
schema or database, a SQLite file, or a store in this process's memory.

A template names the place with `{tenant}` where the tenant's name goes:

- `postgresql://app@db/shop?schema=shop_{tenant}`: a schema per tenant, in one database;
- `postgresql://app@db/shop_{tenant}`: a database per tenant (made on first use, which
  needs CREATEDB);
- `sqlite:///tenants/{tenant}.db` or `sqlite:///tenants/{tenant}/events.db`: a file per
  tenant (in the second, a folder per tenant, made for it and removed with it);
- `memory://`: a store per tenant in this process, gone with it.

Or every tenant side by side in the tables of one schema, with no `{tenant}`:
`postgresql://app@db/shop?schema=shop&tenancy=shared` (`postgres/side_by_side.py`), a
tenant's place being its part of those tables (kind `shared`), its store's URL the
template with `&tenant=acme`.

A function from the tenant id to a URL (`Callable[[str], str]`) may place tenants
anywhere else, one server for some and another for the rest, say.

**One place, one tenant.** The tenant id is checked first (`tenant_ids.py`). In a file
name it is used as it is; in a SQL name its `-` becomes `_`, which no tenant id holds, so
no two tenants map to one name. In a SQL name `{tenant}` follows a prefix of lowercase
letters, digits and `_` that begins with a letter (`shop_`): without one a tenant named
`public` or `postgres` would be the server's own, and the name could begin with a digit.
A schema or database name is checked whole as well (letters, digits and `_`, at most
63 bytes, not one of PostgreSQL's), and a template is refused at once if the longest
tenant id would make a name PostgreSQL cuts. `{tenant}` may be in no other part of a
URL (not a host, a user, an option).

`TenantPlace` is what a tenant's store is opened at; dropping the tenant removes it
(`drop`). This module knows nothing of stores being open: `tenants.py` does.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, parse_qsl, unquote_plus, urlsplit, urlunsplit

from .arguments import redacted
from .backends import scheme_of
from .errors import InvalidTenant, UnsupportedStoreURL
from .postgres import side_by_side_layout as shared_layout
from .postgres import tenant_places as postgres_places
from .postgres.side_by_side import SideBySide, is_side_by_side, side_by_side, tenant_url
from .postgres.target import PostgresTarget
from .sqlite import tenant_files
from .sqlite.options import PREFIX as SQLITE_PREFIX
from .tenant_ids import MAX_TENANT_LENGTH, check_tenant

TENANT = "{tenant}"
"""Where a template puts the tenant's name."""
TENANT_OPTION = "tenant"
"""The URL option naming one tenant: `?tenant=acme`."""

Resolver = str | Callable[[str], str]
"""Where each tenant's store is: a URL template with `{tenant}`, or a function from the
tenant id to its store's URL."""

_PREFIX = re.compile(r"[a-z][a-z0-9_]*")
_SUFFIX = re.compile(r"[a-z0-9_]*")
_SQL_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_MOST_SQL_NAME = 63  # bytes PostgreSQL keeps of a name; the rest it cuts, silently
_RESERVED_SCHEMAS = frozenset({"public", "information_schema"})
_RESERVED_DATABASES = frozenset({"postgres", "template0", "template1"})
_PROBE = "a"  # a tenant id whose place says what server, database or folder to look in


@dataclass(frozen=True)
class TenantPlace:
    """Where one tenant's store is.

    Example::

        from eventcraft.eventstore import Tenants

        shops = "postgresql://app@db.example/shop?schema=shop_{tenant}"
        with Tenants(shops) as tenants:  # nothing is connected to until a store is used
            place = tenants.place_of("north-wind")
        assert (place.kind, place.name) == ("schema", "shop_north_wind")
        assert place.url.startswith("postgresql://app@db.example/shop?schema=shop_north_wind")
    """

    tenant: str
    """The tenant id."""
    url: str
    """The URL its store is opened at."""
    kind: str
    """`schema`, `database` (PostgreSQL), `file` (SQLite), `memory`, or `shared` (the
    tenant's rows in tables every tenant shares: `tenancy=shared`)."""
    name: str
    """The schema's or database's name, the file's path, `memory`, or for `shared` the
    schema of the views every tenant's store reads."""
    folder: str | None = None
    """A SQLite file's folder when `{tenant}` names it: made for the tenant, removed with it."""

    def __repr__(self) -> str:
        # The URL may hold a password: shown masked, as every message of the store shows it.
        folder = "" if self.folder is None else f", folder={self.folder!r}"
        return (
            f"TenantPlace(tenant={self.tenant!r}, url={redacted(self.url)!r}, "
            f"kind={self.kind!r}, name={self.name!r}{folder})"
        )

    @property
    def where(self) -> tuple[str, ...]:
        """What two places share when they are one: the server, database and schema, or the
        file's absolute path (case folded: a case-insensitive file system makes `A.db` and
        `a.db` one file). A memory store is nowhere another can be."""
        if self.kind == "file":
            return ("file", os.path.normcase(os.path.abspath(self.name)).casefold())
        if self.kind == "memory":
            return ("memory", self.tenant)
        if self.kind == "shared":  # a tenant's part of shared tables is its own
            parts = urlsplit(self.url)
            return (
                "shared",
                parts.hostname or "",
                str(parts.port or ""),
                parts.path,
                self.name,
                self.tenant,
            )
        target = PostgresTarget.from_url(self.url)
        parts = urlsplit(target.conninfo)
        return ("postgresql", parts.hostname or "", str(parts.port or ""), parts.path, self.name)

    def remove(self) -> TenantDrop:
        """Remove this place whole, whatever it holds: its schema, database or file (a
        tenant's read-model database, say, which is no store). Nothing may be connected to
        it. A tenant's store is dropped with `EventStore.drop_tenant`, which removes its
        archive too."""
        return drop(self, ())


@dataclass(frozen=True)
class TenantDrop:
    """What dropping a tenant removed.

    Example::

        from eventcraft.eventstore import NewEvent, Tenants

        with Tenants("sqlite:///tenant-{tenant}.db") as tenants:
            acme = tenants.for_tenant("acme")
            acme.append("order-1", [NewEvent("Placed", {})])
            dropped = acme.drop_tenant()
        assert (dropped.place.kind, dropped.place.name, dropped.existed) == (
            "file", "tenant-acme.db", True
        )
        assert dropped.archives == ()  # no retention run archived it
    """

    place: TenantPlace
    """The tenant's place, removed whole: its schema, database or file, and all in it."""
    existed: bool
    """Whether there was anything to remove (False: the tenant never had a store there)."""
    archives: tuple[str, ...]
    """The folders of the archive its retention runs wrote, removed too."""


class TenantPlaces:
    """Each tenant's place, from a template or a function (`Resolver`); with `pool_size`,
    a PostgreSQL place's URL gets that pool size, and may not give its own."""

    def __init__(self, places: Resolver, *, pool_size: int | None = None) -> None:
        self._pool_size = pool_size
        self._template: _Template | None = None
        self._function: Callable[[str], str] | None = None
        if isinstance(places, str):
            self._template = _Template.parse(places)
            try:  # refused now rather than for the first long tenant id, months later
                self.place("a" * MAX_TENANT_LENGTH)
            except (InvalidTenant, UnsupportedStoreURL) as error:
                raise UnsupportedStoreURL(
                    f"the template {redacted(places)!r} cannot place every tenant (tried with "
                    f"a tenant id of {MAX_TENANT_LENGTH} characters, the longest): {error}"
                ) from None
        elif callable(places):
            self._function = places
        else:
            raise UnsupportedStoreURL(
                "tenants' places are a URL with {tenant} or a function from a tenant id to "
                f"a URL, not {type(places).__name__}"
            )
        self.description = places if isinstance(places, str) else _named(places)
        """The template, or the function's name: for messages and `repr`."""

    def place(self, tenant: str) -> TenantPlace:
        """The place of `tenant`, checked; `InvalidTenant` for a tenant id the store refuses,
        `UnsupportedStoreURL` for a place that could not be one tenant's."""
        tenant = check_tenant(tenant)
        if self._template is not None:
            url, folder = self._template.filled(tenant)
        else:
            assert self._function is not None
            url = self._function(tenant)
            if not isinstance(url, str):
                raise UnsupportedStoreURL(
                    f"{self.description} gave {type(url).__name__} for tenant {tenant!r}, "
                    "not a store URL"
                )
            folder = None
        return _place(tenant, url, folder, self._pool_size)

    def known(self) -> list[str]:
        """The tenants that have a place now, sorted: the template's files (or folders)
        that hold a store file, its schemas or its databases, each named as the template
        names a tenant's (a PostgreSQL name's `_` read back as the tenant id's `-`). A name
        no tenant id gives, or that another tenant's place would have, is left out.

        Every schema or database that the template gives a tenant counts, whatever made
        it: keep the template's prefix for tenants. Tenants placed by a function, or in
        memory, cannot be found from here (`UnsupportedStoreURL`)."""
        if self._template is None:
            raise UnsupportedStoreURL(
                f"tenants placed by {self.description} cannot be listed: only a URL "
                "template with {tenant} says where to look for them"
            )
        template = self._template
        if template.kind == "memory":
            raise UnsupportedStoreURL(
                "memory:// tenants are known only to the Tenants holding them"
            )
        found: list[str] = []
        for name, tenant in template.candidates(self.place(_PROBE).url):
            try:
                place = self.place(tenant)
            except (InvalidTenant, UnsupportedStoreURL):
                continue  # no tenant id names it
            if place.name == name and (template.kind != "file" or exists(place)):
                found.append(tenant)
        return sorted(found)

    @property
    def is_memory(self) -> bool:
        """Whether every tenant's store is in this process's memory (a `memory://` template)."""
        return self._template is not None and self._template.kind == "memory"


def tenant_place(url: str) -> TenantPlace | None:
    """The place of the tenant a store URL names with `?tenant=` (its template filled in),
    None for a URL of no tenant: for a reader that opens the tenant's database or file
    itself, never the template's text (Spark's executors, a read model's database).
    `UnsupportedStoreURL` for `{tenant}` without `?tenant=` or the other way round, and
    `InvalidTenant` for a tenant id the store refuses.

    Example::

        from eventcraft.eventstore import tenant_place

        place = tenant_place("sqlite:///tenants/{tenant}.db?tenant=acme")
        assert place is not None and (place.tenant, place.kind) == ("acme", "file")
        assert place.url == "sqlite:///tenants/acme.db"
        assert tenant_place("sqlite:///shop.db") is None
    """
    url = _braces(url)
    base, tenant = _without_tenant_option(url)
    shared = _shared(base)
    if shared:
        _side_by_side(base)  # its options checked first
    if tenant is None:
        if TENANT in url or shared:
            how = "with {tenant}" if TENANT in url else "side by side (tenancy=shared)"
            raise UnsupportedStoreURL(
                f"{redacted(url)!r} names the stores of every tenant {how}: say which "
                f"tenant with ?tenant=NAME, or give it to Tenants to open any of them"
            )
        return None
    if TENANT not in base and not shared and not base.lower().startswith("memory:"):
        raise UnsupportedStoreURL(
            f"?tenant= needs {{tenant}} in the URL, where the tenant's schema, database or "
            f"file is named ({_example(base)}), or tenancy=shared, which holds every tenant "
            "side by side in one schema's tables"
        )
    return TenantPlaces(base).place(tenant)


def prepare(place: TenantPlace) -> None:
    """What a tenant's store needs before it opens: its database or its folder, made."""
    if place.kind == "database":
        postgres_places.create_database(place.url, place.name)
    # A shared place is made by its store's open (side_by_side_layout.prepare).
    elif place.folder is not None:
        tenant_files.make_folder(place.folder)


def exists(place: TenantPlace) -> bool:
    """Whether the tenant has a store at `place` (a memory place is asked of its holder)."""
    if place.kind == "schema":
        return postgres_places.schema_exists(place.url, place.name)
    if place.kind == "database":
        return postgres_places.database_exists(place.url, place.name)
    if place.kind == "file":
        return tenant_files.exists(place.name)
    if place.kind == "shared":
        return shared_layout.tenant_exists(_side_by_side(place.url), place.tenant)
    return False


def drop(place: TenantPlace, archives: Sequence[str]) -> TenantDrop:
    """Remove the tenant's place whole, and then the archive folders its retention runs
    wrote (`archives`). Its store must be closed: this process holds no connection to it."""
    if place.kind == "shared":
        existed = shared_layout.drop_tenant(_side_by_side(place.url), place.tenant)
        removed = tuple(_remove_archive(folder) for folder in dict.fromkeys(archives))
        return TenantDrop(place, existed, tuple(folder for folder in removed if folder))
    existed = place.kind == "memory" or exists(place)
    if place.kind == "schema":
        postgres_places.drop_schema(place.url, place.name)
    elif place.kind == "database":
        postgres_places.drop_database(place.url, place.name)
    elif place.kind == "file":
        tenant_files.remove(place.name, None)
    removed = tuple(_remove_archive(folder) for folder in dict.fromkeys(archives))
    if place.kind == "file" and place.folder is not None:
        tenant_files.remove(place.name, place.folder)  # the folder last: the archive was in it
    return TenantDrop(place, existed, tuple(folder for folder in removed if folder))


def _remove_archive(folder: str) -> str:
    """Remove the archive folder `folder` if it is a local folder; what was removed."""
    path = Path(folder)
    if "://" in folder or not path.is_absolute() or not path.is_dir():
        return ""
    shutil.rmtree(path)
    return folder


@dataclass(frozen=True)
class _Template:
    """A URL template: where `{tenant}` is, and how it is filled."""

    url: str
    kind: str
    """Where `{tenant}` is: `schema`, `database`, `file`; or `memory` (nowhere)."""

    @classmethod
    def parse(cls, template: str) -> _Template:
        template = _braces(template)
        scheme = scheme_of(template)
        count = template.count(TENANT)
        if scheme == "memory":
            if count:
                raise UnsupportedStoreURL(
                    "memory:// takes no {tenant}: every tenant's memory store is its own"
                )
            return cls(template, "memory")
        if scheme == "postgresql" and _shared(template):
            if count:
                raise UnsupportedStoreURL(
                    "tenancy=shared places every tenant side by side in one schema: it takes "
                    "no {tenant} (a place per tenant is the other placement)"
                )
            _side_by_side(template)  # its options checked now
            return cls(template, "shared")
        if scheme not in ("sqlite", "postgresql"):
            raise UnsupportedStoreURL(
                f"a store per tenant is a PostgreSQL schema or database, a SQLite file or "
                f"memory://; {scheme} is none of them (give Tenants a function instead)"
            )
        if count != 1:
            raise UnsupportedStoreURL(
                f"a template names the tenant's place with {{tenant}} once, not {count} times: "
                f"{redacted(template)!r} ({_example(template)})"
            )
        if scheme == "sqlite":
            if TENANT in template.partition("?")[2]:
                raise UnsupportedStoreURL(
                    "{tenant} goes in a SQLite URL's path (sqlite:///tenants/{tenant}.db), "
                    "not in its options"
                )
            return cls(template, "file")
        return cls(template, _postgres_kind(urlsplit(template)))

    def candidates(self, probe_url: str) -> list[tuple[str, str]]:
        """The places there are that this template could have filled, each as its name (a
        file's path, a schema's or a database's name) and the tenant id it would be for,
        unchecked: `probe_url` is a filled URL, which says what to connect to."""
        if self.kind == "file":
            path = self.url[len(SQLITE_PREFIX) :].partition("?")[0]
            parts = path.split("/")
            at = next(n for n, part in enumerate(parts) if TENANT in part)
            parent = "/".join(parts[:at]) or ("/" if path.startswith("/") else "")
            rest = "/".join(parts[at + 1 :])
            named = _matching(parts[at], tenant_files.names_in(parent), "-")
            return [
                ("/".join([*parts[:at], name, *([rest] if rest else [])]), tenant)
                for name, tenant in named
            ]
        if self.kind == "shared":
            shared = _side_by_side(self.url)
            return [(shared.schema, tenant) for tenant in shared_layout.known(shared)]
        if self.kind == "schema":
            query = urlsplit(self.url).query
            schema = dict(parse_qsl(query, keep_blank_values=True))["schema"]
            prefix = schema.partition(TENANT)[0]
            return _matching(schema, postgres_places.schemas_named(probe_url, prefix), "_")
        database = urlsplit(self.url).path.lstrip("/")
        prefix = database.partition(TENANT)[0]
        return _matching(database, postgres_places.databases_named(probe_url, prefix), "_")

    def filled(self, tenant: str) -> tuple[str, str | None]:
        """The URL of `tenant`'s place, and its own folder if the template names one."""
        if self.kind == "memory":
            return self.url, None
        if self.kind == "shared":
            return tenant_url(self.url, tenant), None
        if self.kind == "file":
            url = self.url.replace(TENANT, tenant)
            path = self.url[len(SQLITE_PREFIX) :].partition("?")[0]
            folder = os.path.dirname(path)
            named = folder if TENANT in os.path.basename(folder) else None
            return url, named.replace(TENANT, tenant) if named is not None else None
        return self.url.replace(TENANT, tenant.replace("-", "_")), None


def _matching(named: str, names: Sequence[str], dash: str) -> list[tuple[str, str]]:
    """Those of `names` that `named` (a name with `{tenant}`) could be, each with the
    tenant id it would be for: what stands for `{tenant}`, `dash` read back as `-`."""
    prefix, _, suffix = named.partition(TENANT)
    pattern = re.compile(re.escape(prefix) + "(.+)" + re.escape(suffix))
    found = []
    for name in names:
        match = pattern.fullmatch(name)
        if match is not None:
            found.append((name, match.group(1).replace(dash, "-")))
    return found


def _postgres_kind(parts: SplitResult) -> str:
    """Where a PostgreSQL template has `{tenant}`: in `schema=` or in the database."""
    schema = dict(parse_qsl(parts.query, keep_blank_values=True)).get("schema", "")
    if TENANT in schema:
        _check_affixes("schema", schema)
        return "schema"
    if TENANT in parts.path:
        _check_affixes("database", parts.path.lstrip("/"))
        return "database"
    raise UnsupportedStoreURL(
        "{tenant} goes in a PostgreSQL URL's schema (?schema=shop_{tenant}) or its database "
        "(postgresql://host/shop_{tenant}), not in its host, user or other options"
    )


def _check_affixes(what: str, name: str) -> None:
    prefix, _, suffix = name.partition(TENANT)
    if not _PREFIX.fullmatch(prefix) or not _SUFFIX.fullmatch(suffix):
        raise UnsupportedStoreURL(
            f"a {what} named {name!r}: {{tenant}} follows a prefix of lowercase letters, "
            f"digits and '_' that begins with a letter (shop_{{tenant}}), and may be followed "
            f"by more of them: alone, a tenant could be named {_reserved(what)}"
        )


def _reserved(what: str) -> str:
    return "'public' or 'pg_catalog'" if what == "schema" else "'postgres' or 'template1'"


def _place(tenant: str, url: str, folder: str | None, pool_size: int | None) -> TenantPlace:
    """The place at `url`, its kind and name read from it and checked."""
    kind = scheme_of(url)
    if kind == "memory":
        return TenantPlace(tenant, url, "memory", "memory")
    if kind == "sqlite":
        path = url[len(SQLITE_PREFIX) :].partition("?")[0] if url.startswith(SQLITE_PREFIX) else ""
        if not path or path == ":memory:":
            raise UnsupportedStoreURL(
                f"tenant {tenant!r}'s place {url!r} is no file: a SQLite tenant needs a file"
            )
        return TenantPlace(tenant, url, "file", path, folder)
    if kind != "postgresql":
        raise UnsupportedStoreURL(
            f"tenant {tenant!r}'s place is a {kind} store: a store per tenant is a PostgreSQL "
            "schema or database, a SQLite file or memory://"
        )
    if pool_size is not None:
        url = _with_pool_size(url, pool_size)
    if _shared(url):
        named = _side_by_side(url).tenant
        if named is not None and named != tenant:
            raise InvalidTenant(
                f"tenant {tenant!r}'s place names another tenant, {named!r}: a place given "
                "to a tenant side by side is its own part of the tables"
            )
        shared = _side_by_side(tenant_url(url, tenant))
        return TenantPlace(tenant, tenant_url(url, tenant), "shared", shared.schema)
    target = PostgresTarget.from_url(url)
    if target.schema is not None:
        _check_sql_name(tenant, "schema", target.schema, _RESERVED_SCHEMAS)
        return TenantPlace(tenant, url, "schema", target.schema)
    database = urlsplit(url).path.lstrip("/")
    _check_sql_name(tenant, "database", database, _RESERVED_DATABASES)
    return TenantPlace(tenant, url, "database", database)


def _check_sql_name(tenant: str, what: str, name: str, reserved: frozenset[str]) -> None:
    if not _SQL_NAME.fullmatch(name) or len(name.encode()) > _MOST_SQL_NAME:
        raise UnsupportedStoreURL(
            f"tenant {tenant!r}'s {what} would be {name!r}: a {what} of a tenant is lowercase "
            f"letters, digits and '_', at most {_MOST_SQL_NAME} of them (PostgreSQL cuts "
            "longer names, and two tenants could meet in one)"
        )
    if name in reserved or name.startswith("pg_"):
        raise InvalidTenant(
            f"tenant {tenant!r}'s {what} would be {name!r}, which is PostgreSQL's own"
        )


def _with_pool_size(url: str, pool_size: int) -> str:
    """`url` with `pool_size` added: the pool size of a tenant's store is its `Tenants`'."""
    if "pool_size" in dict(parse_qsl(urlsplit(url).query, keep_blank_values=True)):
        raise UnsupportedStoreURL(
            "a tenant's URL gives no pool_size: Tenants(pool_size=...) sets it for every "
            "tenant, so that the connections of all of them are bounded"
        )
    return pool_sized(url, pool_size)


def pool_sized(url: str, pool_size: int) -> str:
    """The PostgreSQL store URL `url` with its `pool_size` option set to `pool_size`."""
    parts = urlsplit(url)
    kept = [item for item in parts.query.split("&") if item and not item.startswith("pool_size=")]
    query = "&".join([*kept, f"pool_size={pool_size}"])
    return urlunsplit(parts._replace(query=query))


def _without_tenant_option(url: str) -> tuple[str, str | None]:
    """`url` less its `tenant=` option, and the option's value (None if it has none)."""
    base, mark, query = url.partition("?")
    items = query.split("&") if mark else []
    named = [i for i, item in enumerate(items) if item.partition("=")[0] == TENANT_OPTION]
    if not named:
        return url, None
    if len(named) > 1:
        raise UnsupportedStoreURL("a store URL names one tenant: ?tenant= is given twice")
    tenant = unquote_plus(items[named[0]].partition("=")[2])
    kept = items[: named[0]] + items[named[0] + 1 :]
    return (f"{base}?{'&'.join(kept)}" if kept else base), tenant


def _shared(url: str) -> bool:
    """Whether `url` is a PostgreSQL URL of tenants side by side (`tenancy=`)."""
    return is_side_by_side(url) and scheme_of(url) == "postgresql"


def _side_by_side(url: str) -> SideBySide:
    shared = side_by_side(url)
    assert shared is not None  # asked of URLs `_shared` told
    return shared


def _braces(url: str) -> str:
    """`url` with a percent-encoded `{tenant}` (`%7Btenant%7D`, as some tools write it)
    written out."""
    return re.sub("%7btenant%7d", TENANT, url, flags=re.IGNORECASE)


def _example(url: str) -> str:
    if url.lower().startswith("sqlite"):
        return "sqlite:///tenants/{tenant}.db?tenant=acme"
    return "postgresql://host/db?schema=shop_{tenant}&tenant=acme"


def _named(function: Callable[[str], str]) -> str:
    return getattr(function, "__qualname__", None) or repr(function)
