"""Reading a long result page by page, by key.

SQL backends read in pages of short statements instead of one open cursor:
no transaction or connection stays held while a caller consumes the
iterator at its own pace. Rows up to the high-water mark never change, so
pages read at different moments still make one consistent sequence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from itertools import chain
from typing import Any, Generic, TypeVar

R = TypeVar("R")
Row = Sequence[Any]


class PageWalk(Generic[R]):
    """Where the next page starts and how many rows it asks for: the one rule of
    `paged` and `paged_async`."""

    def __init__(
        self, start: int, next_start: Callable[[R], int], limit: int | None, page: int
    ) -> None:
        self.start = start
        self._next_start = next_start
        self._remaining = -1 if limit is None else limit
        self._page = page
        self.size = self._size()
        """Rows the next page asks for; 0 when the walk is over."""

    def _size(self) -> int:
        if self._remaining == 0:
            return 0
        return self._page if self._remaining < 0 else min(self._page, self._remaining)

    def took(self, rows: Sequence[R]) -> None:
        """Move past `rows`, the page just fetched: a short page ends the walk."""
        if len(rows) < self.size:
            self.size = 0
            return
        self.start = self._next_start(rows[-1])
        if self._remaining > 0:
            self._remaining -= len(rows)
        self.size = self._size()


def paged(
    fetch: Callable[[int, int], Sequence[R]],
    start: int,
    next_start: Callable[[R], int],
    limit: int | None,
    page: int,
) -> Iterator[R]:
    """The rows `fetch(start, count)` returns, page after page.

    `next_start(last_row)` gives the key the next page starts from; a short
    page ends the iteration, as does reaching `limit` rows. The rows of a page
    are handed out by C (`chain`), not one resume of a generator each: 0.1 ms of
    a 1,000-event page.
    """
    return chain.from_iterable(_pages(fetch, start, next_start, limit, page))


def _pages(
    fetch: Callable[[int, int], Sequence[R]],
    start: int,
    next_start: Callable[[R], int],
    limit: int | None,
    page: int,
) -> Iterator[Sequence[R]]:
    walk = PageWalk(start, next_start, limit, page)
    while walk.size:
        rows = fetch(walk.start, walk.size)
        yield rows
        walk.took(rows)


async def paged_async(
    fetch: Callable[[int, int], Awaitable[Sequence[R]]],
    start: int,
    next_start: Callable[[R], int],
    limit: int | None,
    page: int,
) -> AsyncIterator[R]:
    """`paged` for an awaited `fetch`, rows yielded as fetched."""
    walk = PageWalk(start, next_start, limit, page)
    while walk.size:
        rows = await fetch(walk.start, walk.size)
        for row in rows:
            yield row
        walk.took(rows)
