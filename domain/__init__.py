"""domain: aggregates, their events and repositories (coming: issue 3)."""

__all__: list[str] = []
