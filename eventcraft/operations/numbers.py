"""Whole numbers a person typed (a position, a version, a count), checked the same way by
every shell before any store sees them."""

from __future__ import annotations

from eventcraft.eventstore import MAX_AFTER, MAX_INT

from .errors import InputError

__all__ = ["MAX_AFTER", "MAX_INT", "whole_number"]


def whole_number(text: str, name: str, *, least: int = 0, most: int = MAX_INT) -> int:
    """`text` as a whole number from `least` to `most`, else `InputError` naming `name`.

    Only ASCII digits: `str.isdigit` also takes '²', which `int` refuses. The length is
    checked before `int` reads it, which refuses thousands of digits with an error of its
    own.
    """
    text = text.strip()
    digits = text.isascii() and text.isdigit() and len(text) <= len(str(most))
    if not digits or not least <= int(text) <= most:
        raise InputError(f"{name} must be a whole number from {least} to {most}, not {text!r}")
    return int(text)
