"""projections: read models kept from the global log (coming: issues 4 and 5)."""

__all__: list[str] = []
