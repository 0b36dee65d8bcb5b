"""The Parquet archive's layout: what its segments are called and when they form one log.

Retention writes the archive (`projections/archive_files.py`) and Spark reads and writes
it (`projections/spark/archive.py`) by these rules; a store opened with `archive=` reads
it by them (`archive_reads.py`), and the command line checks an archive by them before a
JVM starts. The store keeps them because it is the lowest part that reads the archive."""

from __future__ import annotations

import re
from collections.abc import Iterable

SEGMENT_NAME = re.compile(r"from-(\d+)-to-(\d+)")
"""A segment's folder: `from-<first position>-to-<last position>`."""


def segment_name(first: int, last: int) -> str:
    """The folder name of the segment holding positions `first` to `last`.

    Example::

        from eventcraft.eventstore import segment_name, segment_span

        assert segment_name(1, 300) == "from-000000000000001-to-000000000000300"
        assert segment_span(segment_name(1, 300)) == (1, 300)
    """
    return f"from-{first:015d}-to-{last:015d}"


def span_of(name: str) -> tuple[int, int] | None:
    """The positions a segment's folder name says it holds; None if it is no segment's.

    Example::

        from eventcraft.eventstore import segment_span

        assert segment_span("from-000000000000001-to-000000000000300") == (1, 300)
        assert segment_span("_SUCCESS") is None  # not a segment's folder
    """
    match = SEGMENT_NAME.fullmatch(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def chain_break(spans: Iterable[tuple[int, int]]) -> str | None:
    """Why segments sorted by their first position are not one log from position 1, or None.

    Each must start where the one before ended: a later start leaves a gap an
    archive reader would skip, an earlier one overlaps and would read events twice.

    Example::

        from eventcraft.eventstore import archive_chain_break, segment_span

        folders = ["from-1-to-300", "from-301-to-450", "from-460-to-500"]
        spans = sorted(span for span in map(segment_span, folders) if span is not None)
        assert archive_chain_break(spans) == (
            "segment from 460 to 500 leaves a gap (the log continues at 451)"
        )
        assert archive_chain_break(spans[:2]) is None  # one log from position 1
    """
    expected = 1
    for first, last in spans:
        if first != expected:
            what = "overlaps the one before" if first < expected else "leaves a gap"
            return f"segment from {first} to {last} {what} (the log continues at {expected})"
        expected = last + 1
    return None
