"""The production backend: PostgreSQL through psycopg 3 (see `backend.py`)."""

from .backend import PostgresBackend, batch_json
from .connections import PostgresTarget

__all__ = ["PostgresBackend", "PostgresTarget", "batch_json"]
