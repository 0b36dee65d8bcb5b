"""sagas: durable orchestration with compensation (coming: issue 6)."""

__all__: list[str] = []
