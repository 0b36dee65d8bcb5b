"""The sync modules generated from their async sources by scripts/async_to_sync.py."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scripts import async_to_sync
from scripts.async_to_sync import GenerationError, Pair, convert

ROOT = Path(__file__).resolve().parent.parent


def sync(
    source: str, names: dict[str, str] | None = None, text: dict[str, str] | None = None
) -> str:
    """The sync version of a snippet, indented as in the test."""
    return convert(textwrap.dedent(source), names, text)


def test_every_generated_module_is_what_its_async_source_makes() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/async_to_sync.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"run `make generate`:\n{done.stdout}{done.stderr}"


def test_each_pair_names_an_async_source_and_a_target_that_exist() -> None:
    targets = [pair.target for pair in async_to_sync.PAIRS]
    assert len(set(targets)) == len(targets)
    for pair in async_to_sync.PAIRS:
        assert (ROOT / pair.source).is_file(), pair.source
        assert (ROOT / pair.target).is_file(), pair.target
        assert pair.source != pair.target


def test_async_is_dropped_before_def_for_and_with_and_await_everywhere() -> None:
    written = sync(
        """
        async def fetch(store):
            async with store.lock() as lock:
                async for event in store.read(await lock.head()):
                    yield [x async for x in event.parts()], (await store.count()) + 1
        """
    )
    assert written == textwrap.dedent(
        """
        def fetch(store):
            with store.lock() as lock:
                for event in store.read(lock.head()):
                    yield [x for x in event.parts()], (store.count()) + 1
        """
    )


def test_names_are_renamed_in_code_and_as_whole_words_in_strings_and_comments() -> None:
    written = sync(
        '''
        """Reads an `AsyncEventStore` (see AsyncEventStore.read); AsyncEventStores stay."""
        from collections.abc import AsyncIterator

        class Reader:  # over an AsyncEventStore
            async def __aenter__(self) -> AsyncIterator[int]:
                raise StopAsyncIteration(f"{AsyncEventStore.__name__}")
        '''
    )
    assert "`EventStore` (see EventStore.read); AsyncEventStores stay." in written
    assert "from collections.abc import Iterator\n" in written
    assert "# over an EventStore" in written
    assert "def __enter__(self) -> Iterator[int]:" in written
    assert 'raise StopIteration(f"{EventStore.__name__}")' in written


def test_a_pair_renames_its_own_names_on_top_of_the_global_ones() -> None:
    written = sync(
        "x = _read_async(AsyncEventStore)  # _read_async\n", names={"_read_async": "_read"}
    )
    assert written == "x = _read(EventStore)  # _read\n"


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("Callable[[A], R | Awaitable[R]]", "Callable[[A], R]"),
        ("Callable[[A], Awaitable[list[R]] | list[R]]", "Callable[[A], list[R]]"),
        ("Callable[[], Awaitable[None]]", "Callable[[], None]"),
        ("Awaitable[R] | None", "R | None"),
        ("Awaitable[AsyncIterator[int]]", "Iterator[int]"),
        ("AsyncGenerator[int, None]", "Generator[int, None, None]"),
    ],
)
def test_awaitable_of_x_reads_as_x_and_an_async_generator_returns_none(
    annotation: str, expected: str
) -> None:
    assert sync(f"x: {annotation}\n") == f"x: {expected}\n"


def test_a_true_marked_block_gives_way_to_its_else_branch_dedented() -> None:
    written = sync(
        """
        def run(step):
            outcome = step()
            if True:  # ASYNC: a step may be a coroutine function
                if inspect.isawaitable(outcome):
                    outcome = await outcome
            else:
                # sync only
                outcome = wait(outcome)
            return outcome
        """
    )
    assert written == textwrap.dedent(
        """
        def run(step):
            outcome = step()
            # sync only
            outcome = wait(outcome)
            return outcome
        """
    )


def test_a_type_checking_marked_block_is_for_the_async_module_only() -> None:
    written = sync(
        """
        class Repository:
            if TYPE_CHECKING:  # ASYNC

                @overload
                async def execute(self, command: Callable[[], Awaitable[R]]) -> R: ...

                @overload
                async def execute(self, command: Callable[[], R]) -> R: ...

            async def execute(self, command: Callable[[], R | Awaitable[R]]) -> R:
                return command()
        """
    )
    assert "overload" not in written
    assert "    def execute(self, command: Callable[[], R]) -> R:\n" in written


def test_a_false_marked_block_is_for_the_sync_module_only() -> None:
    source = """
        class Store:
            if False:  # ASYNC
                def __del__(self) -> None:
                    '''Closes.

                        Indented text stays as it was written.
                    '''
            else:
                async def aclose(self) -> None: ...
        """
    written = sync(source)
    assert "aclose" not in written and "def close" not in written
    assert "    def __del__(self) -> None:\n        '''Closes." in written
    assert "\n                Indented text stays as it was written.\n" in written
    compile(written, "<sync>", "exec")


def test_marked_blocks_nest() -> None:
    written = sync(
        """
        if True:  # ASYNC
            a = 1
        else:
            if False:  # ASYNC
                b = 2
            c = 3
        """
    )
    assert written == "\nb = 2\nc = 3\n"


@pytest.mark.parametrize(
    "source",
    [
        "x = 1  # ASYNC\n",
        "if ready:  # ASYNC\n    x = 1\n",
        "if True:  # ASYNC\n    x = 1\nelif ready:\n    x = 2\n",
        "if True: x = 1  # ASYNC\n",
    ],
)
def test_a_marker_anywhere_but_a_true_type_checking_or_false_if_is_refused(source: str) -> None:
    with pytest.raises(GenerationError, match=r"ASYNC|elif|below"):
        sync(source)


def test_a_text_replacement_takes_a_line_it_empties_and_must_match_something() -> None:
    source = '''
        def execute(decide):
            """Decide, then append.

            `decide` is awaited if it returns an awaitable.
            Example: await execute(decide)
            """
        '''
    phrases = {"`decide` is awaited if it returns an awaitable.": "", "await execute(": "execute("}
    written = sync(source, text=phrases)
    assert '"""Decide, then append.\n\n    Example: execute(decide)\n    """' in written
    with pytest.raises(GenerationError, match="match nothing"):
        sync(source, text={"not there": ""})


def test_the_code_of_a_docstrings_example_is_made_sync_and_its_prose_is_not() -> None:
    written = sync(
        '''
        class AsyncEventStore:
            """A store you await.

            Example::

                async with await AsyncEventStore.open("memory://") as store:
                    await store.append("order-1", events)
                    read = [e async for e in store.read_stream("order-1")]
                assert read

            Open it and await it: after the block, await is prose.
            """
        '''
    )
    assert written == textwrap.dedent(
        '''
        class EventStore:
            """A store you await.

            Example::

                with EventStore.open("memory://") as store:
                    store.append("order-1", events)
                    read = [e for e in store.read_stream("order-1")]
                assert read

            Open it and await it: after the block, await is prose.
            """
        '''
    )
    with pytest.raises(GenerationError, match="Example"):
        sync('"""A thing.\n\nExample::\n\n    await (\n"""\n')


TOY = '''\
"""`AsyncCounter`: counts the events of an `AsyncEventStore`."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable

from eventcraft.eventstore import AsyncEventStore


class AsyncCounter:
    """Counts, awaiting its store."""

    def __init__(self, store: AsyncEventStore) -> None:
        self.store = store

    async def count(self, check: Callable[[int], bool | Awaitable[bool]]) -> int:
        total = 0
        async for _ in self.events():
            ok = check(total)
            if True:  # ASYNC
                if inspect.isawaitable(ok):
                    ok = await ok
            total += ok
        return total

    async def events(self) -> AsyncIterator[int]:
        for version in range(await self.store.stream_version("s")):
            yield version
'''


def test_a_toy_pair_is_written_with_its_header_and_then_checked(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "async_counter.py").write_text(TOY)
    pair = Pair("pkg/async_counter.py", "pkg/counter.py", names={"AsyncCounter": "Counter"})

    assert async_to_sync.main(["--check"], [pair], tmp_path) == 1  # no target yet
    assert async_to_sync.main([], [pair], tmp_path) == 0
    written = (tmp_path / "pkg" / "counter.py").read_text()
    assert written.startswith(
        "# Generated from pkg/async_counter.py by scripts/async_to_sync.py: do not edit.\n"
        "# Edit pkg/async_counter.py, then run `make generate`.\n"
        '"""`Counter`: counts the events of an `EventStore`."""\n'
    )
    tree = ast.parse(written)
    assert ast.get_docstring(tree) == "`Counter`: counts the events of an `EventStore`."
    assert "import inspect" not in written  # only the async side used it
    assert "from collections.abc import Callable, Iterator\n" in written
    assert "def count(self, check: Callable[[int], bool]) -> int:" in written
    asynchronous = (ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith, ast.Await)
    assert not [node for node in ast.walk(tree) if isinstance(node, asynchronous)]
    assert async_to_sync.stale([pair], tmp_path) == []
    assert async_to_sync.main(["--check"], [pair], tmp_path) == 0

    (tmp_path / "pkg" / "counter.py").write_text(written.replace("total = 0", "total = 1"))
    [(stale, diff)] = async_to_sync.stale([pair], tmp_path)
    assert stale == pair
    assert "-        total = 1\n+        total = 0\n" in diff
    assert async_to_sync.main(["--check"], [pair], tmp_path) == 1


def test_a_form_feed_or_line_separator_in_a_string_shifts_no_edit() -> None:
    source = 'x = "a\x0cb\u2028c"\nawait AsyncEventStore.open()\n'
    assert convert(source) == 'x = "a\x0cb\u2028c"\nEventStore.open()\n'
