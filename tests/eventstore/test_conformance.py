"""Every backend passes the shipped conformance suite; the backend is a fixture parameter."""

from eventcraft.eventstore.testing import EventStoreConformance


class TestEveryBackend(EventStoreConformance):
    pass
