"""The production backend: PostgreSQL through psycopg 3 (see `backend.py`)."""

from .backend import PostgresBackend
from .statements import batch_json
from .target import PostgresTarget

__all__ = ["PostgresBackend", "PostgresTarget", "batch_json"]
