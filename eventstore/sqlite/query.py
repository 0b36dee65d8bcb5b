"""Queries by types and tags in SQLite's SQL: the reads of `read_query` and the check of a
conditional append, one statement each built from the query.

SQLite serializes writers (BEGIN IMMEDIATE), so a condition checked inside the
append's write transaction sees every event committed before it and none can
commit until it ends: no locks beyond that are needed (`postgres/tag_functions.py` says
what PostgreSQL needs instead).
"""

from __future__ import annotations

from typing import Any

from ..encoding import MAX_INT
from ..query import Query
from ..sql import schema
from .statements import COLUMNS

E = schema.EVENTS
T = schema.TAGS
_RANGE = "position > :start AND position <= :last"


def positions(query: Query) -> tuple[str, dict[str, Any]]:
    """A SELECT of the positions in (:start, :last] of events matching `query`, and its
    parameters but `start` and `last`. An event matching several items comes once."""
    if query.matches_all:
        return f"SELECT position FROM {E} WHERE {_RANGE}", {}
    params: dict[str, Any] = {}
    branches = []
    for n, item in enumerate(query.items):
        types = ""
        if item.types:
            names = [f":q{n}t{k}" for k in range(len(item.types))]
            params.update(zip((name[1:] for name in names), item.types, strict=True))
            types = f"type IN ({', '.join(names)})"
        if not item.tags:
            branches.append(f"SELECT position FROM {E} WHERE {types} AND {_RANGE}")
            continue
        walks = []
        for k, tag in enumerate(item.tags):
            params[f"q{n}g{k}"] = tag
            also = f"{types} AND " if types and k == 0 else ""
            walks.append(f"SELECT position FROM {T} WHERE tag = :q{n}g{k} AND {also}{_RANGE}")
        branches.append(f"SELECT position FROM ({' INTERSECT '.join(walks)})")
    return " UNION ".join(branches), params


def read_query(query: Query, last: int) -> tuple[str, dict[str, Any]]:
    """The paged read of events matching `query` up to `last`, and its parameters but
    `start` and `count`."""
    selected, params = positions(query)
    return (
        f"SELECT {COLUMNS} FROM {E} WHERE position IN ({selected}) ORDER BY position LIMIT :count",
        {**params, "last": last},
    )


def first_match(query: Query, after: int | None) -> tuple[str, dict[str, Any]]:
    """The first position after `after` holding an event matching `query` (NULL if none)."""
    selected, params = positions(query)
    return f"SELECT min(position) FROM ({selected})", {
        **params,
        "start": after or 0,
        "last": MAX_INT,
    }
