"""Reading a long result page by page, by key.

SQL backends read in pages of short statements instead of one open cursor:
no transaction or connection stays held while a caller consumes the
iterator at its own pace. Rows up to the high-water mark never change, so
pages read at different moments still make one consistent sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Row = Sequence[Any]


def paged(
    fetch: Callable[[int, int], Sequence[R]],
    start: int,
    next_start: Callable[[R], int],
    make: Callable[[R], T],
    limit: int | None,
    page: int,
) -> Iterator[T]:
    """Yield `make(row)` for the rows `fetch(start, count)` returns, page after page.

    `next_start(last_row)` gives the key the next page starts from; a short
    page ends the iteration, as does reaching `limit` rows.
    """
    remaining = -1 if limit is None else limit
    while remaining != 0:
        size = page if remaining < 0 else min(page, remaining)
        rows = fetch(start, size)
        for row in rows:
            yield make(row)
        if len(rows) < size:
            return
        start = next_start(rows[-1])
        if remaining > 0:
            remaining -= len(rows)
