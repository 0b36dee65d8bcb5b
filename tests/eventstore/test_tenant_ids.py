"""Tenant ids: one rule for every placement, and one error saying what is wrong with a
hostile one (empty, too long, control characters, SQL, `..`, separators, case)."""

from __future__ import annotations

import re

import pytest
from eventcraft.eventstore import MAX_TENANT_LENGTH, InvalidTenant, check_tenant
from hypothesis import given
from hypothesis import strategies as st

TAKEN = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
DEVICES = re.compile(r"con|prn|aux|nul|com[0-9]|lpt[0-9]")


@pytest.mark.parametrize(
    "tenant",
    ["acme", "a", "7", "north-wind", "3f2a9c1e-7b4d-4e0a-9f51-2c8d6e0b1a77", "a" * 48, "a--b"],
)
def test_a_tenant_id_of_lowercase_letters_digits_and_dashes_is_taken(tenant: str) -> None:
    assert check_tenant(tenant) == tenant


@pytest.mark.parametrize(
    ("tenant", "said"),
    [
        ("", "is empty"),
        ("a" * (MAX_TENANT_LENGTH + 1), "has 49 characters: a tenant id has at most 48"),
        ("ac\x00me", "holds the control character U+0000"),
        ("acme\n", "holds the control character U+000A"),
        ("acme\u202e", "holds the control character U+202E"),  # right-to-left override
        ("acme'; DROP SCHEMA public CASCADE; --", 'holds "\'"'),
        ("acme; drop table x", "holds ';'"),
        ("../acme", "holds a path separator"),
        ("acme/../../etc", "holds a path separator"),
        ("c:\\acme", "holds a path separator"),
        ("..", "holds '..', which would name a parent folder"),
        ("acme..x", "holds '..'"),
        ("Acme", "has capital letters: tenant ids are lowercase, so that no two tenants"),
        ("ACME", "use 'acme'"),
        ("-acme", "begins with '-', which tools read as an option"),
        ("acme_corp", "holds '_'"),
        ("acme.db", "holds '.'"),
        ("acme corp", "holds ' '"),
        ("\uff41\uff43\uff4d\uff45", "holds '\uff41'"),  # fullwidth: looks like acme, is not
        ("acmé", "holds 'é'"),
        ("{tenant}", "holds '{'"),
        ("%2e%2e", "holds '%'"),
        ("con", "is a device name on Windows"),
        ("lpt1", "is a device name on Windows"),
    ],
)
def test_a_hostile_tenant_id_is_refused_saying_what_is_wrong(tenant: str, said: str) -> None:
    with pytest.raises(InvalidTenant) as refused:
        check_tenant(tenant)
    assert str(refused.value).startswith("tenant id ")
    assert said in str(refused.value)
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize("tenant", [None, 7, b"acme", ["acme"]])
def test_a_tenant_id_is_a_str(tenant: object) -> None:
    with pytest.raises(InvalidTenant, match="tenant id must be a str, not "):
        check_tenant(tenant)


def test_a_long_hostile_tenant_id_is_shown_cut_in_its_error() -> None:
    with pytest.raises(InvalidTenant) as refused:
        check_tenant("x" * 10_000)
    assert len(str(refused.value)) < 200


@given(st.text(max_size=60))
def test_every_text_is_taken_as_it_is_or_refused_with_a_reason(text: str) -> None:
    try:
        taken = check_tenant(text)
    except InvalidTenant as error:
        assert not TAKEN.fullmatch(text) or DEVICES.fullmatch(text)
        assert str(error).startswith("tenant id ")
    else:
        assert taken == text and TAKEN.fullmatch(text)


@given(st.from_regex(TAKEN, fullmatch=True), st.from_regex(TAKEN, fullmatch=True))
def test_two_tenants_never_share_a_sql_name_nor_a_file_name(one: str, other: str) -> None:
    """In a SQL name `-` becomes `_`, which no tenant id holds; no two differ in case."""
    if one != other:
        assert one.replace("-", "_") != other.replace("-", "_")
        assert one.casefold() != other.casefold()
