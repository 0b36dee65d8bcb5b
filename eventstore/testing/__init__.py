"""The conformance suite every backend passes, shipped so that a third-party backend can
run it: subclass `EventStoreConformance` in a test module and give it a `store` fixture
(see `conformance.py`). Each part of the suite is a module of this folder, one concept
each; `EventStoreConformance` includes them all."""

from .conformance import EventStoreConformance

__all__ = ["EventStoreConformance"]
