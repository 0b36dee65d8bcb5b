"""The embedded backend: one SQLite file, shared by threads and processes (`backend.py`),
with everything it does: its options, statements, rows, queries, retention and key table."""
