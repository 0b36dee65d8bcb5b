"""Tenant ids: what may name a tenant, checked once for every placement.

A tenant id ends up in places that read it differently: a PostgreSQL schema or
database name, a file name, a row's column, a URL, a log line. So it is kept to
what every one of them reads alike: lowercase ASCII letters, digits and `-`,
beginning with a letter or a digit, at most `MAX_TENANT_LENGTH` characters (a
UUID fits). Nothing in it needs quoting or escaping anywhere, and:

- No two tenant ids differ only in case, so no case-insensitive file system or
  collation can make two tenants one (`Acme` is refused, saying to use `acme`).
- No tenant id is a path: no separator, no `.` (so no `..`), no leading `-`
  that a tool would read as an option, no name Windows reserves (`con`, `nul`).
- In a SQL name `-` becomes `_`, which no tenant id holds: the mapping is one to
  one, so two tenants never share a schema or a database (`tenant_places.py`).

The same rule holds for the placement that keeps tenants side by side in one
database (a tenant column), so that a tenant can move from one to the other.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import InvalidTenant

MAX_TENANT_LENGTH = 48
"""The most characters a tenant id may have: a UUID's 36 and a prefix of 15 still fit in
PostgreSQL's 63-byte names.

Example::

    from eventcraft.eventstore import MAX_TENANT_LENGTH, InvalidTenant, check_tenant

    assert check_tenant("a" * MAX_TENANT_LENGTH)
    try:
        check_tenant("a" * (MAX_TENANT_LENGTH + 1))
    except InvalidTenant as error:
        assert "a tenant id has at most 48" in str(error)
"""

_TENANT = re.compile(r"[a-z0-9][a-z0-9-]*")
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"{d}{n}" for d in ("com", "lpt") for n in range(10)]
)


def check_tenant(tenant: object) -> str:
    """`tenant` if it may name a tenant; `InvalidTenant` saying what is wrong otherwise.

    A tenant id is lowercase ASCII letters, digits and `-`, begins with a letter or a
    digit, and has at most `MAX_TENANT_LENGTH` characters.

    Example::

        from eventcraft.eventstore import InvalidTenant, check_tenant

        assert check_tenant("acme") == "acme"
        assert check_tenant("3f2a9c1e-7b4d-4e0a-9f51-2c8d6e0b1a77")  # a UUID
        for hostile in ["", "Acme", "../acme", "acme; DROP SCHEMA public", "acme\\x00"]:
            try:
                check_tenant(hostile)
            except InvalidTenant as error:
                assert str(error).startswith("tenant id ")
            else:
                raise AssertionError(f"{hostile!r} was taken")
    """
    if not isinstance(tenant, str):
        raise InvalidTenant(f"tenant id must be a str, not {type(tenant).__name__}: {tenant!r:.60}")
    if _TENANT.fullmatch(tenant) and len(tenant) <= MAX_TENANT_LENGTH:
        if tenant in _WINDOWS_DEVICES:
            raise InvalidTenant(
                f"tenant id {tenant!r} is a device name on Windows: its file would not be a file"
            )
        return tenant
    raise InvalidTenant(f"tenant id {_shown(tenant)} {_fault(tenant)}")


def _fault(tenant: str) -> str:
    """What is wrong with `tenant`, which the rule refused: the first thing a reader must
    change, said plainly."""
    if not tenant:
        return "is empty: a tenant needs a name"
    if len(tenant) > MAX_TENANT_LENGTH:
        return f"has {len(tenant)} characters: a tenant id has at most {MAX_TENANT_LENGTH}"
    control = next((c for c in tenant if unicodedata.category(c).startswith("C")), None)
    if control is not None:
        return f"holds the control character U+{ord(control):04X}"
    if "/" in tenant or "\\" in tenant:
        return "holds a path separator: a tenant id names one file or schema, not a path"
    if ".." in tenant:
        return "holds '..', which would name a parent folder"
    if tenant.lower() != tenant and _TENANT.fullmatch(tenant.lower()):
        return (
            f"has capital letters: tenant ids are lowercase, so that no two tenants differ "
            f"only in case (a case-insensitive file system would make them one); "
            f"use {tenant.lower()!r}"
        )
    if tenant.startswith("-"):
        return "begins with '-', which tools read as an option"
    bad = next(c for c in tenant if not ("a" <= c <= "z" or "0" <= c <= "9" or c == "-"))
    return (
        f"holds {bad!r}: a tenant id is lowercase letters, digits and '-', "
        "so that it needs no quoting in a SQL name, a file name or a URL"
    )


def _shown(tenant: str) -> str:
    """`tenant` as an error shows it: quoted, escaped, and cut if long."""
    shown = repr(tenant)
    return shown if len(shown) <= 70 else shown[:60] + "...'"
