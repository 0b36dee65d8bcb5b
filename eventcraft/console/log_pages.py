"""The pages that read the log: Overview, Log (with its live tail), Streams, Stream, Event
and Trace, and the downloads of an event (JSON) and of any filtered list (NDJSON).

Each parses the query, calls one function of `eventcraft.operations`, and renders.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from eventcraft.eventstore import JsonLines, RecordedEvent

from ..operations import log, newest, overview, projections, transfer, typed
from ..operations.documents import event_document, event_line
from ..operations.errors import InputError
from ..operations.log import LogFilter
from ..operations.numbers import MAX_AFTER
from .paging import NOT_KEPT, PAGE, TAIL_READ, link, number, page_size
from .rendering import console_of, page

TAIL = 200
"""Most events one poll of the live tail brings."""

READ_TO = "Eventcraft-Read-To"
"""The live tail's header: the position it read up to, where its next poll starts."""

REACH = 50_000
"""Positions a Trace reached from an event searches on either side of it."""

SCAN = 100_000
"""Most events a page of a Trace reads: a correlation spread wider takes more pages."""


def overview_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    found = overview.overview(console.store, console.app)
    peak = max(found.recent.per_minute) or 1
    return page(request, "overview.html", active="Overview", overview=found, peak=peak)


def log_page(request: Request) -> HTMLResponse:
    where = log_filter(request)
    before = number(request, "before")
    limit = page_size(request)
    found = newest.log_page(console_of(request).store, before=before, limit=limit, where=where)
    return page(
        request,
        "log.html",
        active="Log",
        found=found,
        where=where,
        live=before is None,
        query=_kept(request, "before"),
        projection=request.query_params.get("projection", "").strip(),
    )


def log_tail(request: Request) -> HTMLResponse:
    """The events after `after` that the filters accept, newest first: rows to prepend.
    It reads at most `TAIL_READ` events of the log, and says in its `READ_TO` header how
    far it read: the page's next poll asks for the events after there."""
    # From 0: the page's table may have no row yet to take a position from.
    after = number(request, "after", least=0, most=MAX_AFTER) or 0
    store, where = console_of(request).store, log_filter(request)
    found = log.tail(store, after=after, limit=TAIL, scan=TAIL_READ, where=where)
    response = page(request, "log_rows.html", badges=False, events=list(reversed(found.events)))
    response.headers[READ_TO] = str(found.read_to)
    return response


def log_download(request: Request) -> StreamingResponse:
    """The log after `after` as NDJSON: unfiltered or by categories, the lines `eventcraft
    export` writes, streamed as the store makes them; otherwise the events the filters
    accept, one line each."""
    where = log_filter(request)
    after = number(request, "after", least=0, most=MAX_AFTER) or 0
    store = console_of(request).store
    if where == LogFilter(categories=where.categories):
        return _export(transfer.exported(store, after=after, categories=where.categories))
    events = log.log_events(store, after=after, limit=None, where=where)
    return _ndjson(events, "log.ndjson")


def streams_page(request: Request) -> HTMLResponse:
    prefix = request.query_params.get("prefix", "").strip()
    category = request.query_params.get("category", "").strip() or None
    after = request.query_params.get("after") or None
    found = log.stream_search(
        console_of(request).store, prefix=prefix, category=category, after=after, limit=PAGE
    )
    return page(
        request,
        "streams.html",
        active="Streams",
        streams=found,
        prefix=prefix,
        category=category or "",
        more=len(found) == PAGE,
        query=_kept(request, "after"),
    )


def stream_page(request: Request) -> HTMLResponse:
    stream_id = _stream_id(request)
    start = number(request, "from") or 1
    events = log.stream_events(console_of(request).store, stream_id, from_version=start, limit=PAGE)
    return page(
        request,
        "stream.html",
        active="Streams",
        stream_id=stream_id,
        events=events,
        start=start,
        more=len(events) == PAGE,
    )


def stream_download(request: Request) -> StreamingResponse:
    stream_id = _stream_id(request)
    events = log.stream_events(console_of(request).store, stream_id, from_version=None, limit=None)
    return _ndjson(events, f"{_file_name(stream_id)}.ndjson")


def event_page(request: Request) -> HTMLResponse:
    event = log.find_event(console_of(request).store, request.path_params["key"])
    metadata = event.metadata
    return page(
        request,
        "event.html",
        active="Log",
        event=event,
        correlation=metadata.get("correlation_id"),
        causation=metadata.get("causation_id"),
        typed=typed.typed_event(console_of(request).app, event),
    )


def event_download(request: Request) -> Response:
    event = log.find_event(console_of(request).store, request.path_params["key"])
    body = orjson.dumps(event_document(event), option=orjson.OPT_INDENT_2)
    return Response(
        body,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="event-{event.position}.json"'},
    )


def trace_page(request: Request) -> HTMLResponse:
    """A page of the correlation's events, searched for around `near` (a position) if
    given, else in the whole log, from `after` on: each page reads at most `SCAN` events."""
    correlation = request.query_params.get("correlation", "").strip()
    if not correlation:
        raise InputError("a trace needs a correlation id: ?correlation=ID")
    store = console_of(request).store
    near = number(request, "near")
    start, before = 0, None
    if near is not None:
        start, before = max(near - REACH, 0), min(near + REACH, store.high_water_mark()) + 1
    after = number(request, "after", least=0, most=MAX_AFTER)
    found = log.trace_page(
        store,
        correlation,
        after=start if after is None else max(after, start),
        before=before,
        limit=page_size(request),
        budget=SCAN,
    )
    return page(
        request,
        "trace.html",
        active="Log",
        correlation=correlation,
        found=found,
        searched=None if before is None else (start + 1, before - 1),
        first=link(request, after=None) if after is not None else None,
        next=None if found.next_after is None else link(request, after=found.next_after),
    )


# --- parsing the query ------------------------------------------------------------


def log_filter(request: Request) -> LogFilter:
    """The Log page's filters: comma-separated categories, types and tags (an event carries
    all of them), a correlation id, and a time range in UTC (`2026-01-31T12:00`); or, with
    `projection`, the events that projection reads (its query too, which the other fields
    cannot state), narrowed by the rest."""
    params = request.query_params
    where = LogFilter(
        categories=_names(params.get("category", "")),
        types=_names(params.get("type", "")),
        tags=_names(params.get("tag", "")),
        correlation_id=params.get("correlation", "").strip() or None,
        since=_time(params.get("since", ""), "since"),
        until=_time(params.get("until", ""), "until"),
    )
    name = params.get("projection", "").strip()
    if not name:
        return where
    reads = projections.reads(console_of(request).app, name)
    return replace(
        where,
        categories=where.categories or reads.categories,
        types=where.types or reads.types,
        query=reads.query,
    )


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _time(text: str, name: str) -> datetime | None:
    text = text.strip()
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{name} must be a time such as 2026-01-31T12:00, not {text!r}") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _stream_id(request: Request) -> str:
    stream_id = request.query_params.get("id", "")
    if not stream_id:
        raise InputError("name the stream: ?id=STREAM")
    return stream_id


def _kept(request: Request, dropped: str) -> list[tuple[str, str]]:
    """The query's parameters but `dropped` and the status line, for links to the next
    page."""
    gone = (dropped, *NOT_KEPT)
    return [(k, v) for k, v in request.query_params.multi_items() if k not in gone and v]


def _file_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:100] or "stream"


def _ndjson(events: Iterable[RecordedEvent], name: str) -> StreamingResponse:
    # The first event is read before the response starts: what the store refuses (a
    # filter, a bound) is an error page, not a download cut off after its 200.
    read = iter(events)
    first = next(read, None)

    def lines() -> Iterator[bytes]:
        if first is not None:
            yield event_line(first)
        for event in read:
            yield event_line(event)

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def _export(chunks: Iterator[tuple[str, JsonLines, int]]) -> StreamingResponse:
    # As `_ndjson`: the first chunk is made before the response starts.
    first = next(chunks, None)

    def texts() -> Iterator[bytes]:
        if first is not None:
            yield first[0].encode()
        for text, _, _ in chunks:
            yield text.encode()

    return StreamingResponse(
        texts(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="log.ndjson"'},
    )


ROUTES = [
    Route("/", overview_page, name="overview"),
    Route("/log", log_page, name="log"),
    Route("/log/tail", log_tail, name="log_tail"),
    Route("/log.ndjson", log_download, name="log_download"),
    Route("/streams", streams_page, name="streams"),
    Route("/stream", stream_page, name="stream"),
    Route("/stream.ndjson", stream_download, name="stream_download"),
    Route("/events/{key}", event_page, name="event"),
    Route("/events/{key}/download", event_download, name="event_download"),
    Route("/trace", trace_page, name="trace"),
]
