"""`list_streams` in SQL, one query for both SQL backends, each giving its parameter marks.

The streams come from their catalogue (`schema.STREAMS`) in id order, each with its
version, leaving out those deleted and not written since (`deletion.listed`). A
category is a range of the catalogue's primary key (`events.category_range`), with the
category checked on each row of it: the range may hold an id of another category.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..events import category_range
from . import deletion, schema


def list_streams_query(
    category: str | None, after: str | None, limit: int | None, mark: Callable[[str], str]
) -> tuple[str, dict[str, Any]]:
    """The query and its named parameters; `mark(name)` is how the driver spells one."""
    query = (
        f"SELECT stream_id, (SELECT max(version) FROM {schema.EVENTS} e "
        f"WHERE e.stream_id = s.stream_id) FROM {schema.STREAMS} s "
        f"WHERE stream_id > {mark('after')} AND {deletion.listed('s')}"
    )
    params: dict[str, Any] = {"after": after or "", "limit": limit}
    if category is not None:
        query += (
            f" AND stream_id >= {mark('low')} AND stream_id < {mark('high')}"
            f" AND category = {mark('category')}"
        )
        low, high = category_range(category)
        params.update(low=low, high=high, category=category)
    return f"{query} ORDER BY stream_id LIMIT {mark('limit')}", params
