"""How the console's lists are paged: by a cursor (the position, stream or message the
next page starts after, a keyset), never by an offset, in pages of at most `MOST` rows.

A page asks the store for what it shows and a row more (or for a bounded stretch of
the log to search), so its memory and time stay the same however much the store
holds. A `limit` beyond `MOST` is refused with one clear error, not trimmed: a
script that asks for more learns at once that it gets less.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request

from ..operations.numbers import MAX_INT, whole_number

PAGE = 50
"""Rows on a page unless `limit` asks for another number."""

MOST = 500
"""Most rows a page holds: the largest `limit` taken."""

TAIL_READ = 10_000
"""Most events of the log one poll of the live tail reads: a filter the store does not
apply (a correlation, a time) that matches little reads this far, says so, and the
page's next poll goes on from there."""

NOT_KEPT = ("message", "signed")
"""Parameters a link to another page drops: the status line is the page's own."""


def page_size(request: Request, default: int = PAGE) -> int:
    """The `limit` of the query, from 1 to `MOST`; `default` if absent."""
    text = request.query_params.get("limit", "").strip()
    return whole_number(text, "limit", least=1, most=MOST) if text else default


def link(request: Request, **changed: object) -> str:
    """This page's address with the parameters `changed` (dropped where None): the
    address of the first or the next page."""
    kept = [
        (key, value)
        for key, value in request.query_params.multi_items()
        if key not in changed and key not in NOT_KEPT and value
    ]
    kept += [(key, str(value)) for key, value in changed.items() if value is not None]
    # The path as the browser asked for it, the prefix of a mounting service included.
    return request.url.path + (f"?{urlencode(kept)}" if kept else "")


def number(request: Request, name: str, *, least: int = 1, most: int = MAX_INT) -> int | None:
    """The query parameter `name` as a whole number from `least` to `most`, None if absent
    or empty."""
    text = request.query_params.get(name, "").strip()
    return whole_number(text, name, least=least, most=most) if text else None
