"""The identifiers a runner makes from a definition's names, and the limit they must fit.

PostgreSQL cuts an identifier longer than 63 bytes (bytes of UTF-8, not
characters) without a word, so names that differ only past the cut are
one name: a declared table's view lands on its own physical table, two
generations of a table collide. So every identifier the runner makes is
checked when the definition is declared, on every backend: a definition
that works on SQLite works unchanged on PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa

from .errors import DefinitionError

MAX_BYTES = 63
"""PostgreSQL's limit on identifiers (NAMEDATALEN - 1), applied on every backend."""
LAST_GENERATION = 2**31 - 1
"""Generations are numbered in an INTEGER column: no suffix is longer than this one's."""
_LONGEST_SUFFIX = f"__g{LAST_GENERATION}"
MAX_DECLARED_BYTES = MAX_BYTES - len(_LONGEST_SUFFIX)
"""The longest declared table, index or constraint name: 50 bytes of UTF-8."""


def of_generation(name: str, generation: int) -> str:
    """The identifier of `name`'s table, index or constraint in `generation`."""
    return f"{name}__g{generation}"


def check_declared(owner: str, table: sa.Table) -> None:
    """Refuse `table` if a name made from it may pass `MAX_BYTES` in some generation.

    The declared name itself becomes a view, so it is covered too.
    """
    check(owner, "table name", table.name)
    for index in table.indexes:
        check(owner, "index name", index.name)
    for constraint in table.constraints:
        check(owner, "constraint name", constraint.name)


def check(owner: str, what: str, name: object) -> None:
    # Unnamed indexes and constraints are named by the database, which keeps
    # its own names within the limit and unique.
    if not isinstance(name, str) or not name:
        return
    size = len(name.encode())
    if size > MAX_DECLARED_BYTES:
        raise DefinitionError(
            f"{owner}: {what} {name!r} is {size} bytes in UTF-8, over {MAX_DECLARED_BYTES}: "
            f"each generation's copy, {name}__g<n>, must fit in {MAX_BYTES} bytes "
            f"(PostgreSQL's limit on identifiers, kept on every backend) for any n "
            f"up to {LAST_GENERATION}"
        )
