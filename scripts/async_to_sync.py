"""Generate the sync modules from their async sources: async code is written once.

Each pair in `PAIRS` names an async module (the source, the one to edit) and the sync
module generated from it (the target, never edited by hand). The sync module is the
async one with:

- `async` dropped before `def`, `for` and `with`, and `await` dropped;
- names renamed by `RENAMES` (for every pair) and by the pair's own `names`: as
  identifiers, and as whole words inside strings, docstrings and comments, so a
  docstring that says `AsyncEventStore` says `EventStore` in the sync module;
- `Awaitable[X]` read as `X`: `X | Awaitable[X]` (either order) becomes `X`, any
  other `Awaitable[X]` becomes `X` (a callable that may return either, awaited if it
  did, takes only `X` in the sync module); `AsyncGenerator[Y, S]` becomes
  `Generator[Y, S, None]`;
- the pair's `text` replacements applied, as written, inside strings and comments:
  the few phrases no rename can say ("awaited if ...", "for asyncio"); a phrase
  replaced by nothing that stands alone on its line takes the line with it;
- the code of a docstring's `Example::` block made sync as code is (after the `text`
  replacements): the async name's example runs awaiting, and the sync name's, made of
  it, runs on the sync API (tests/docs/test_docstring_examples.py runs both);
- the blocks marked for one side resolved (below);
- a header saying where it comes from, then `ruff check --fix-only --select I,F401`
  (imports only the async side used go) and `ruff format`, with the venv's ruff.

Markers: an `if` whose line ends with the comment `# ASYNC` separates what differs::

    if True:  # ASYNC
        ...  # async only
    else:
        ...  # sync only: the sync module keeps this branch, dedented

    if TYPE_CHECKING:  # ASYNC
        ...  # the same, for what only the type checker reads (mypy merges
             # overloads only under a condition it can infer, and `True` is not one)

    if False:  # ASYNC
        ...  # sync only: the async module never runs it, the sync module keeps it

The rule behind the three: the sync module keeps the branch the async module skips.
`else` is optional; `elif` is refused, and so is a `# ASYNC` comment on any other line
or on an `if` whose body shares its line. Keep the blocks small: what differs, no more.

Usage, with the Python of the project's venv (it runs that venv's ruff), from any folder::

    .venv/bin/python scripts/async_to_sync.py           # rewrite each target that changed
    .venv/bin/python scripts/async_to_sync.py --check   # exit 1 naming each stale target

One more pair: add a `Pair(source, target)` line to `PAIRS`, with `names` for the
renames only it needs (a private `_x_async` helper, say) and `text` for its phrases;
then run the script and commit both modules. `tests/test_generated_sync.py` fails
while any target differs from what the script would write.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Pair:
    """An async module and the sync module generated from it."""

    source: str
    """The async module, relative to the project root: the one to edit."""
    target: str
    """The sync module written from it, relative to the project root."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Renames for this pair only, on top of `RENAMES`."""
    text: Mapping[str, str] = field(default_factory=dict)
    """Exact phrases replaced inside this pair's strings and comments (each must occur)."""


RENAMES: Mapping[str, str] = {
    # The standard library's async protocols and helpers.
    "AbstractAsyncContextManager": "AbstractContextManager",
    "AsyncContextManager": "ContextManager",
    "AsyncExitStack": "ExitStack",
    "AsyncGenerator": "Generator",
    "AsyncIterable": "Iterable",
    "AsyncIterator": "Iterator",
    "StopAsyncIteration": "StopIteration",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "aclose": "close",
    "aclosing": "closing",
    "aiter": "iter",
    "anext": "next",
    "asynccontextmanager": "contextmanager",
    "enter_async_context": "enter_context",
    # psycopg's.
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncCursor": "Cursor",
    "AsyncTransaction": "Transaction",
    # Ours.
    "AsyncBackend": "Backend",
    "AsyncDecisions": "Decisions",
    "AsyncEventStore": "EventStore",
    "AsyncPostgresBackend": "PostgresBackend",
    "AsyncRepository": "Repository",
    "AsyncTenants": "Tenants",
    "async_port": "port",
    "async_tenants": "tenants",
}

PAIRS: Sequence[Pair] = (
    Pair(
        "domain/async_repository.py",
        "domain/repository.py",
        text={"A `command` that returns an awaitable (a coroutine function) is awaited.": ""},
    ),
    Pair(
        "domain/async_decisions.py",
        "domain/decisions.py",
        text={
            "await decisions.execute(": "decisions.execute(",
            "`decide` is awaited if it returns an awaitable.": "",
        },
    ),
    Pair(
        "eventstore/async_port.py",
        "eventstore/port.py",
        text={
            "every async backend": "every backend",
            "Reads return async iterators that fetch page by page.": "",
            "Storage for one async event store, used from the event loop it was opened on.": (
                "Storage for one event store. Safe to share between threads."
            ),
            "Sleep until the high-water mark": "Block until the high-water mark",
            "Release connections and threads.": "Release connections.",
            # The async port is not public: its example imports it from its module.
            "from eventcraft.eventstore.async_port import AsyncBackend": (
                "from eventcraft.eventstore import AsyncBackend"
            ),
        },
    ),
    Pair("eventstore/postgres/async_connections.py", "eventstore/postgres/connections.py"),
    Pair(
        "eventstore/postgres/async_standby.py",
        "eventstore/postgres/standby.py",
        names={
            "async_connections": "connections",
            "AsyncReplicaReads": "ReplicaReads",
            "primary_mark_async": "primary_mark",
            "safe_head_async": "safe_head",
            "standby_head_async": "standby_head",
        },
        text={"The sync `ReplicaReads` is generated from this module.": ""},
    ),
    Pair(
        "eventstore/postgres/async_backend.py",
        "eventstore/postgres/backend.py",
        names={
            "async_appends": "appends",
            "AsyncAppends": "Appends",
            "async_connections": "connections",
            "async_listener": "listener",
            "AsyncListener": "Listener",
            "async_standby": "standby",
            "AsyncReplicaReads": "ReplicaReads",
            "copied_async": "copied",
            "database_now_async": "database_now",
            "log_status_async": "log_status",
            "paged_async": "paged",
            "safe_head_async": "safe_head",
            "translated_async": "translated",
        },
    ),
    Pair(
        "eventstore/postgres/async_tenant_rows.py",
        "eventstore/postgres/tenant_rows.py",
        names={
            "async_backend": "backend",
            "async_connections": "connections",
            "AsyncSideBySideBackend": "SideBySideBackend",
        },
        text={
            "\n\nThe sync `SideBySideBackend` is generated from this module "
            "(`scripts/async_to_sync.py`).\n": "\n"
        },
    ),
    Pair(
        "eventstore/async_tenants.py",
        "eventstore/tenants.py",
        names={"async_store": "store"},
        text={
            "\n\nThe sync `Tenants` is generated from this module (`scripts/async_to_sync.py`); "
            "where\nthey differ is how a call waits for a store (a task on an "
            "`asyncio.Condition`, a thread\non a `threading.Condition`) and how the tenant's "
            "store opens.\n": "",
            "Its calls block: run them in a thread.": "",
            "Use it, and the stores it gives, from one event\n    loop, as an `AsyncEventStore`.": (
                "Share it, and the stores it gives,\n    between threads."
            ),
        },
    ),
    Pair(
        "eventstore/async_store.py",
        "eventstore/store.py",
        names={
            "async_backend_for": "backend_for",
            "forget_async": "forget",
            "opened_async": "opened",
            "opened_encoded_async": "opened_encoded",
            "opened_event_async": "opened_event",
            "opened_records_async": "opened_records",
            "opened_snapshot_async": "opened_snapshot",
            "seal_batch_async": "seal_batch",
            "seal_snapshot_async": "seal_snapshot",
        },
        text={
            "\n\nFor code that runs on an event loop: the methods of the sync store, with the\n"
            "same arguments, awaited; reads are async iterators. Arguments are checked by\n"
            "the same functions (`arguments.py`), events encoded by the same\n"
            "`PreparedBatch`, and the SQL and its answers are those of the sync backends:\n"
            "only the waiting differs.\n": "",
            "with one global order, for asyncio.": "with one global order.",
            "Open it with a URL, as the sync store, and await it.": "Open it with a URL.",
            "Use it from the event loop it was opened on; share it between that loop's tasks.": (
                "Safe to share between threads; open one per process."
            ),
            "appends from tasks waiting at the": "appends from threads waiting at the",
            "The key store is asked from a thread.": "",
            "Sleep until an event": "Block until an event",
            "\n        Its calls block: run them in a thread.": "",
        },
    ),
)

HEADER = (
    "# Generated from {source} by scripts/async_to_sync.py: do not edit.\n"
    "# Edit {source}, then run `make generate`.\n"
)
MARKER = re.compile(r"#\s*ASYNC\b")
DIFF_LINES = 40
MARKER_TESTS = {"True": False, "TYPE_CHECKING": False, "False": True}
"""A marker's condition, and whether the sync module keeps the body (else the `else`)."""


class GenerationError(Exception):
    """The async source cannot be turned into its sync module: what to fix, and where."""


def convert(
    source: str,
    names: Mapping[str, str] | None = None,
    text: Mapping[str, str] | None = None,
    *,
    path: str = "<source>",
) -> str:
    """The sync version of the async `source`, before the header and ruff."""
    renames = {**RENAMES, **(names or {})}
    return _tokens_to_sync(_resolve_markers(source, path), renames, text or {}, path)


def generate(pair: Pair, root: Path = ROOT) -> str:
    """The whole sync module of `pair`, as the script writes it."""
    source = (root / pair.source).read_text(encoding="utf-8")
    if ast.get_docstring(ast.parse(source, pair.source)) is None:
        raise GenerationError(f"{pair.source}: a source opens with its module docstring")
    converted = convert(source, pair.names, pair.text, path=pair.source)
    code = HEADER.format(source=pair.source) + converted
    code = _ruff(["check", "--fix-only", "--select", "I,F401"], code, root / pair.target)
    return _ruff(["format"], code, root / pair.target)


def stale(pairs: Iterable[Pair] = PAIRS, root: Path = ROOT) -> list[tuple[Pair, str]]:
    """Each pair whose target is not what `generate` writes, with a short diff."""
    found = []
    for pair in pairs:
        wanted = generate(pair, root)
        path = root / pair.target
        have = path.read_text(encoding="utf-8") if path.exists() else ""
        if have != wanted:
            diff = list(
                difflib.unified_diff(
                    have.splitlines(keepends=True),
                    wanted.splitlines(keepends=True),
                    f"{pair.target} (as it is)",
                    f"{pair.target} (as generated)",
                    n=1,
                )
            )
            shown = "".join(diff[:DIFF_LINES])
            if len(diff) > DIFF_LINES:
                shown += f"... and {len(diff) - DIFF_LINES} more lines\n"
            found.append((pair, shown))
    return found


def write(pairs: Iterable[Pair] = PAIRS, root: Path = ROOT) -> list[Pair]:
    """Rewrite each target that differs from what `generate` makes; the pairs rewritten."""
    written = []
    for pair in pairs:
        wanted = generate(pair, root)
        path = root / pair.target
        if not path.exists() or path.read_text(encoding="utf-8") != wanted:
            path.write_text(wanted, encoding="utf-8")
            written.append(pair)
    return written


def main(
    argv: Sequence[str] | None = None, pairs: Sequence[Pair] = PAIRS, root: Path = ROOT
) -> int:
    """The command line: rewrite the targets, or with `--check` only say which are stale."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in ([], ["--check"]):
        print("usage: python scripts/async_to_sync.py [--check]", file=sys.stderr)
        return 2
    try:
        if args == ["--check"]:
            found = stale(pairs, root)
            for pair, diff in found:
                print(f"stale: {pair.target} (generated from {pair.source})\n{diff}")
            if found:
                print("run `make generate` (python scripts/async_to_sync.py) and commit")
            return 1 if found else 0
        for pair in write(pairs, root):
            print(f"wrote {pair.target} (from {pair.source})")
    except GenerationError as error:
        print(f"async_to_sync: {error}", file=sys.stderr)
        return 1
    return 0


def _resolve_markers(source: str, path: str) -> str:
    """`source` with each `# ASYNC` block replaced by the branch the sync module keeps."""
    while True:
        tree = ast.parse(source, path)
        lines = _lines(source)
        comments = {
            token.start[0]
            for token in _tokens(source)
            if token.type == tokenize.COMMENT and MARKER.match(token.string)
        }
        marked = {
            node.lineno: node
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and node.lineno in comments
        }
        for line in sorted(comments):
            node = marked.get(line)
            if node is None or ast.unparse(node.test) not in MARKER_TESTS:
                raise GenerationError(
                    f"{path}:{line}: `# ASYNC` marks only an `if True:`, "
                    "`if TYPE_CHECKING:` or `if False:` line"
                )
        if not marked:
            return source
        node = marked[min(marked)]  # outermost: a block nested in it starts after it
        if node.body[0].lineno == node.lineno:
            raise GenerationError(f"{path}:{node.lineno}: a marked `if` has its body below it")
        if MARKER_TESTS[ast.unparse(node.test)]:
            branch, start = node.body, node.lineno
        else:
            branch = node.orelse
            start = _else_line(lines, node, path) + 1 if branch else 0
        kept: list[str] = []
        if branch:
            end = branch[-1].end_lineno or branch[-1].lineno
            width = branch[0].col_offset - node.col_offset
            strings = _string_continuations(source)
            kept = [
                line if number in strings else _dedent(line, width)
                for number, line in enumerate(lines[start:end], start + 1)
            ]
        first, last = node.lineno - 1, node.end_lineno or node.lineno
        source = "".join(lines[:first] + kept + lines[last:])


def _else_line(lines: list[str], node: ast.If, path: str) -> int:
    """The 0-based index of the `else:` line of a marked `if`."""
    after = node.body[-1].end_lineno or node.body[-1].lineno
    for index in range(after, node.orelse[0].lineno - 1):
        stripped = lines[index].strip()
        if re.match(r"else\s*:", stripped):
            return index
    raise GenerationError(f"{path}:{node.lineno}: a marked `if` takes `else:`, not `elif`")


def _dedent(line: str, width: int) -> str:
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(spaces, width) :]


def _string_continuations(source: str) -> set[int]:
    """The 1-based numbers of lines inside a multi-line string: left as they are."""
    inside: set[int] = set()
    for token in _tokens(source):
        if token.type == tokenize.STRING and token.end[0] > token.start[0]:
            inside.update(range(token.start[0] + 1, token.end[0] + 1))
    return inside


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(source).readline))


def _lines(source: str) -> list[str]:
    """The lines as tokenize and ast count them (`str.splitlines` also splits at \\f)."""
    return io.StringIO(source).readlines()


Edit = tuple[int, int, str]
"""Replace the source's characters from the first offset to the second with the text."""
SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}
TEXT = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1)}


class _Source:
    """The tokens of a source, with their offsets in it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.starts = [0]
        for line in _lines(text):
            self.starts.append(self.starts[-1] + len(line))

    def at(self, position: tuple[int, int]) -> int:
        return self.starts[position[0] - 1] + position[1]

    def next(self, index: int) -> int | None:
        """The index of the first token after `index` that is code."""
        for after in range(index + 1, len(self.tokens)):
            if self.tokens[after].type not in SKIP:
                return after
        return None

    def previous(self, index: int) -> int | None:
        for before in range(index - 1, -1, -1):
            if self.tokens[before].type not in SKIP:
                return before
        return None

    def string(self, index: int | None) -> str:
        return "" if index is None else self.tokens[index].string

    def closing(self, opening: int) -> tuple[int, int]:
        """The index of the bracket closing the one at `opening`, and the commas at its level."""
        depth, commas = 0, 0
        for index in range(opening, len(self.tokens)):
            token = self.tokens[index]
            string = token.string if token.type == tokenize.OP else ""
            if string in ("[", "(", "{"):
                depth += 1
            elif string in ("]", ")", "}"):
                depth -= 1
                if depth == 0:
                    return index, commas
            elif string == "," and depth == 1:
                commas += 1
        raise GenerationError("unbalanced brackets")


def _tokens_to_sync(
    text: str, renames: Mapping[str, str], phrases: Mapping[str, str], path: str
) -> str:
    source = _Source(text)
    tokens, at = source.tokens, source.at
    names = sorted(renames, key=len, reverse=True)
    words = re.compile(r"(?<!\w)(" + "|".join(map(re.escape, names)) + r")(?!\w)")
    unused = set(phrases)
    edits: list[Edit] = []
    index = 0
    while index < len(tokens):
        token, following = tokens[index], source.string(source.next(index))
        if token.type == tokenize.NAME:
            if token.string == "await" or (
                token.string == "async" and following in ("def", "for", "with")
            ):
                edits.append((at(token.start), at(tokens[index + 1].start), ""))
            elif token.string == "Awaitable" and following == "[":
                index = _awaitable(source, index, edits)
                continue
            elif token.string == "AsyncGenerator" and following == "[":
                close, commas = source.closing(index + 1)
                edits.append((at(token.start), at(token.end), renames[token.string]))
                more = ", None" if commas else ", None, None"
                edits.append((at(tokens[close].start), at(tokens[close].start), more))
            elif token.string in renames:
                edits.append((at(token.start), at(token.end), renames[token.string]))
        elif token.type in TEXT:
            start, end = at(token.start), at(token.end)
            written = original = text[start:end]
            for phrase, replacement in phrases.items():
                if phrase in written:
                    unused.discard(phrase)
                    if not replacement:  # a phrase alone on its line takes the line
                        alone = r"\n[ \t]*" + re.escape(phrase) + r"[ \t]*(?=\n)"
                        written = re.sub(alone, "", written)
                    written = written.replace(phrase, replacement)
            if token.type == tokenize.STRING:
                written = _examples_to_sync(written, renames, path)
            written = words.sub(lambda match: renames[match.group(1)], written)
            if written != original:
                edits.append((start, end, written))
        index += 1
    if unused:
        raise GenerationError(f"{path}: text replacements that match nothing: {sorted(unused)}")
    out, done = [], 0
    for start, end, replacement in sorted(edits):
        out.append(text[done:start] + replacement)
        done = end
    return "".join(out) + text[done:]


def _examples_to_sync(text: str, renames: Mapping[str, str], path: str) -> str:
    """`text`, a string as written, with the code of each `Example::` block in it made
    sync by the rules for code: the block is the lines after that line indented deeper
    (or blank), as tests/docs/test_docstring_examples.py reads it."""
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.strip() != "Example::":
            continue
        indent = _indent(line)
        end = index
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
            end += 1
        while end > index and not lines[end - 1].strip():
            end -= 1
        block = lines[index:end]
        margin = min((_indent(row) for row in block if row.strip()), default=0)
        code = "\n".join(row[margin:] for row in block) + "\n"
        try:
            converted = _tokens_to_sync(code, renames, {}, path)
        except (tokenize.TokenError, SyntaxError) as error:
            raise GenerationError(
                f"{path}: an `Example::` block that is not Python: {error}"
            ) from None
        if converted != code:
            made = converted[:-1].split("\n")
            lines[index:end] = [" " * margin + row if row.strip() else row for row in made]
            end = index + len(made)
        index = end
    return "\n".join(lines)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _awaitable(source: _Source, index: int, edits: list[Edit]) -> int:
    """Edits for the `Awaitable[X]` at `index`; the index of the token to go on from."""
    tokens, at, text = source.tokens, source.at, source.text
    opening = index + 1
    close, _ = source.closing(opening)
    inner = text[at(tokens[opening].end) : at(tokens[close].start)].strip()
    start, end = at(tokens[index].start), at(tokens[close].end)
    before, after = source.previous(index), source.next(close)
    if source.string(before) == "|" and before is not None:
        head = text[: at(tokens[before].start)].rstrip()
        if head.endswith(inner) and not re.search(r"[\w.]$", head[: len(head) - len(inner)]):
            edits.append((len(head), end, ""))  # `X | Awaitable[X]`: the first X stays
            return close + 1
    if source.string(after) == "|" and after is not None:
        rest = at(tokens[after].end)
        tail = text[rest:].lstrip()
        if tail.startswith(inner) and not re.match(r"[\w.\[]", tail[len(inner) :]):
            edits.append((start, len(text) - len(tail), ""))  # `Awaitable[X] | X`: the last
            return close + 1
    edits.append((start, at(tokens[opening].end), ""))  # `Awaitable[` and `]` go, X stays
    edits.append((at(tokens[close].start), end, ""))
    return opening + 1


def _ruff(command: list[str], code: str, path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(path), "-"],
        input=code,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise GenerationError(f"ruff {command[0]} failed on {path}: {done.stderr.strip()}")
    return done.stdout


if __name__ == "__main__":
    sys.exit(main())
