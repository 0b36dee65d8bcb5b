"""Every backend passes the shipped conformance suite; the backend is a fixture parameter."""

from eventstore.testing import EventStoreConformance


class TestEveryBackend(EventStoreConformance):
    pass
