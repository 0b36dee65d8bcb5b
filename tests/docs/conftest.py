"""The documentation's tests: its examples (test_pages.py), its reference against the
code (test_reference.py), and the built site (test_site.py)."""

from __future__ import annotations

import pytest

MARKERS = {
    "docs_build": "builds the documentation site with mkdocs (seconds): `make test-fast` "
    "may leave it out",
    "spark": "starts Spark (a JVM): the SparkSession or a standalone cluster",
    "broker": "needs the RabbitMQ or NATS server",
}


def pytest_configure(config: pytest.Config) -> None:
    # pyproject.toml registers the markers of the whole suite; these are registered here
    # only where it does not (yet).
    registered = {line.split(":")[0].strip() for line in config.getini("markers")}
    for name, text in MARKERS.items():
        if name not in registered:
            config.addinivalue_line("markers", f"{name}: {text}")
