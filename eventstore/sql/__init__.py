"""What the SQL backends (SQLite and PostgreSQL) share: the tables, the conditions that
hide deleted streams, and `list_streams`' query. Each backend's own SQL is in its folder."""
