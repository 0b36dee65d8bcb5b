"""Where each tenant's store is: a template or a function, read and checked before
anything is connected to; `?tenant=` in a store URL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from eventcraft.eventstore import (
    EventStore,
    InvalidTenant,
    NewEvent,
    Tenants,
    UnsupportedStoreURL,
)
from eventcraft.eventstore.tenant_places import TenantPlaces, tenant_place

SHOP = "postgresql://app:s3cret@db.example:5432/shop"


def test_a_schema_per_tenant_is_named_from_the_tenant_with_its_dashes_as_underscores() -> None:
    place = TenantPlaces(f"{SHOP}?schema=shop_{{tenant}}", pool_size=2).place("north-wind")
    assert (place.tenant, place.kind, place.name) == ("north-wind", "schema", "shop_north_wind")
    assert place.url == f"{SHOP}?schema=shop_north_wind&pool_size=2"


def test_a_database_per_tenant_keeps_the_other_options() -> None:
    places = TenantPlaces("postgresql://app@db.example/shop_{tenant}_events?sslmode=prefer")
    place = places.place("a-1")
    assert (place.kind, place.name) == ("database", "shop_a_1_events")
    assert place.url == "postgresql://app@db.example/shop_a_1_events?sslmode=prefer"


def test_a_file_per_tenant_keeps_the_tenant_as_it_is() -> None:
    place = TenantPlaces("sqlite:///tenants/{tenant}.db?synchronous=normal").place("a-1")
    assert (place.kind, place.name, place.folder) == ("file", "tenants/a-1.db", None)
    assert place.url == "sqlite:///tenants/a-1.db?synchronous=normal"


def test_a_folder_per_tenant_is_the_tenants_own() -> None:
    place = TenantPlaces("sqlite:////var/lib/shop/{tenant}/events.db").place("acme")
    assert (place.name, place.folder) == ("/var/lib/shop/acme/events.db", "/var/lib/shop/acme")


def test_a_memory_store_per_tenant() -> None:
    place = TenantPlaces("memory://").place("acme")
    assert (place.kind, place.url) == ("memory", "memory://")


def test_a_place_shows_its_url_with_the_password_masked() -> None:
    place = TenantPlaces(f"{SHOP}?schema=shop_{{tenant}}").place("acme")
    assert "s3cret" not in repr(place) and "app:***@" in repr(place)


@pytest.mark.parametrize(
    ("template", "said"),
    [
        (f"{SHOP}?schema=shop", "names the tenant's place with {tenant} once, not 0 times"),
        ("sqlite:///tenants.db", "once, not 0 times"),
        (f"{SHOP}_{{tenant}}?schema=s_{{tenant}}", "once, not 2 times"),
        ("postgresql://{tenant}@db.example/shop", "goes in a PostgreSQL URL's schema"),
        ("postgresql://app@{tenant}.db.example/shop", "goes in a PostgreSQL URL's schema"),
        (f"{SHOP}?application_name={{tenant}}", "not in its host, user or other options"),
        (f"{SHOP}?schema={{tenant}}", "follows a prefix of lowercase letters"),
        (f"{SHOP}?schema=Shop_{{tenant}}", "follows a prefix of lowercase letters"),
        (f"{SHOP}?schema=1_{{tenant}}", "follows a prefix of lowercase letters"),
        (f"{SHOP}?schema=shop_{{tenant}}-x", "follows a prefix of lowercase letters"),
        ("postgresql://app@db.example/{tenant}", "a tenant could be named 'postgres'"),
        (f"{SHOP}?schema=pg_{{tenant}}", "which is PostgreSQL's own"),
        (f"{SHOP}?schema={'s' * 20}_{{tenant}}", "underscores (at most 63)"),
        (f"{SHOP}?schema=shop_{{tenant}}&pool_size=50", "gives no pool_size: Tenants("),
        ("sqlite:///tenants.db?synchronous={tenant}", "goes in a SQLite URL's path"),
        ("memory://{tenant}", "memory:// takes no {tenant}"),
        ("mysql://db.example/{tenant}", "no backend for"),
    ],
)
def test_a_template_that_cannot_give_each_tenant_a_place_of_its_own_is_refused(
    template: str, said: str
) -> None:
    with pytest.raises(UnsupportedStoreURL) as refused:
        TenantPlaces(template, pool_size=2)
    assert said in str(refused.value)
    assert "s3cret" not in str(refused.value)


def test_a_function_places_each_tenant_where_it_says() -> None:
    def placed(tenant: str) -> str:
        server = "db-eu" if tenant.startswith("eu-") else "db-us"
        return f"postgresql://app@{server}.example/shop?schema=t_{tenant.replace('-', '_')}"

    with Tenants(placed) as tenants:
        assert tenants.place_of("eu-acme").url.startswith("postgresql://app@db-eu.example")
        assert tenants.place_of("globex").name == "t_globex"


def test_a_function_that_places_two_tenants_in_one_place_is_refused_for_the_second() -> None:
    with Tenants(lambda tenant: f"sqlite:///{tenant.upper()[:2]}.db") as tenants:
        tenants.place_of("acme")
        with pytest.raises(InvalidTenant, match="'acme' and 'acorn' would share one place"):
            tenants.for_tenant("acorn")
        assert tenants.place_of("acme").name == "AC.db"  # the first keeps its place


@pytest.mark.parametrize(
    ("url", "error", "said"),
    [
        ("postgresql://app@db.example/postgres", InvalidTenant, "which is PostgreSQL's own"),
        (f"{SHOP}?schema=public", InvalidTenant, "which is PostgreSQL's own"),
        (f"{SHOP}?schema=Shop", UnsupportedStoreURL, "lowercase letters, digits and '_'"),
        ("sqlite:///:memory:", UnsupportedStoreURL, "a SQLite tenant needs a file"),
        ("mysql://db.example/acme", UnsupportedStoreURL, "no backend for"),
    ],
)
def test_a_place_a_function_gives_is_checked_as_a_templates_are(
    url: str, error: type[Exception], said: str
) -> None:
    with Tenants(lambda tenant: url) as tenants, pytest.raises(error, match=re.escape(said)):
        tenants.place_of("acme")


def test_a_function_that_gives_no_url_is_refused() -> None:
    with (
        Tenants(lambda tenant: None) as tenants,  # type: ignore[arg-type,return-value]
        pytest.raises(UnsupportedStoreURL, match="gave NoneType for tenant 'acme'"),
    ):
        tenants.place_of("acme")


def test_tenants_refuse_a_hostile_tenant_before_placing_it() -> None:
    calls: list[str] = []

    def placed(tenant: str) -> str:
        calls.append(tenant)
        return "memory://"

    with Tenants(placed) as tenants:
        for hostile in ["", "../x", "x\x00", "X", "a" * 49, "x'; DROP TABLE y; --"]:
            with pytest.raises(InvalidTenant, match=r"^tenant id "):
                tenants.for_tenant(hostile)
    assert calls == []


def test_a_url_names_one_tenant_with_tenant_and_its_place_with_braces() -> None:
    place = tenant_place("sqlite:///tenants/{tenant}.db?synchronous=normal&tenant=acme")
    assert place is not None and place.url == "sqlite:///tenants/acme.db?synchronous=normal"
    encoded = tenant_place("sqlite:///tenants/%7Btenant%7D.db?tenant=acme")
    assert encoded is not None and encoded.name == "tenants/acme.db"
    assert tenant_place("sqlite:///shop.db?synchronous=normal") is None
    memory = tenant_place("memory://?tenant=acme")
    assert memory is not None and memory.kind == "memory"


@pytest.mark.parametrize(
    ("url", "error", "said"),
    [
        ("sqlite:///shop.db?tenant=acme", UnsupportedStoreURL, "?tenant= needs {tenant}"),
        (f"{SHOP}?tenant=acme", UnsupportedStoreURL, "or tenancy=shared, which holds every tenant"),
        ("sqlite:///t/{tenant}.db", UnsupportedStoreURL, "say which tenant with ?tenant="),
        ("sqlite:///t/{tenant}.db?tenant=a&tenant=b", UnsupportedStoreURL, "given twice"),
        ("sqlite:///t/{tenant}.db?tenant=", InvalidTenant, "is empty"),
        ("sqlite:///t/{tenant}.db?tenant=..%2Fx", InvalidTenant, "path separator"),
        ("sqlite:///t/{tenant}.db?tenant=Acme", InvalidTenant, "use 'acme'"),
    ],
)
def test_a_store_url_with_a_tenant_it_cannot_place_is_refused_before_anything_opens(
    tmp_path: Path, url: str, error: type[Exception], said: str
) -> None:
    with pytest.raises(error, match=re.escape(said)):
        EventStore.open(url.replace("sqlite:///", f"sqlite:///{tmp_path}/"))
    assert list(tmp_path.iterdir()) == []


def test_a_store_opened_for_one_tenant_is_that_tenants_own(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/{{tenant}}/events.db?tenant=acme"
    with EventStore.open(url) as acme:
        acme.append("order-1", [NewEvent("Placed", {})])
        assert (acme.tenant, acme.url) == ("acme", f"sqlite:///{tmp_path}/acme/events.db")
    with EventStore.open(url) as again:
        assert again.stream_version("order-1") == 1
    with EventStore.open(url.replace("=acme", "=globex")) as globex:
        assert globex.stream_version("order-1") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acme", "globex"]


def test_a_store_of_no_tenant_says_how_to_have_tenants(tmp_path: Path) -> None:
    with EventStore.open(f"sqlite:///{tmp_path}/shop.db") as shop:
        assert shop.tenant is None
        with pytest.raises(InvalidTenant, match="this store has no tenants: open it with"):
            shop.for_tenant("acme")
        with pytest.raises(InvalidTenant, match="never the un-tenanted store"):
            shop.drop_tenant()
        assert shop.high_water_mark() == 0  # refused, and still open
