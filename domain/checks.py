"""Checks of the numbers a domain declaration carries (versions, intervals)."""

from __future__ import annotations

from .errors import RegistrationError


def positive_int(what: str, value: object) -> int:
    """`value` if it is an int of at least 1 (not a bool), else a `RegistrationError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RegistrationError(f"{what} must be a positive int, not {value!r}")
    return value


def positive_int_or_none(what: str, value: object) -> int | None:
    return None if value is None else positive_int(what + " (or None)", value)
