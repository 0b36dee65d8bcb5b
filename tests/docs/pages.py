"""The documentation's pages read as the test suite runs them (docs/**/*.md).

The rules (the docs helpers' conventions, issue 53): every ```python block runs, in
order, in one namespace; the HTML comment on the line right before a block says what it
needs (`<!-- needs: postgres, spark -->`) or why it does not run (`<!-- not run: a
fragment of a signature -->`); a ```text block preceded by `<!-- prints -->`, right after
a python block, is what that block prints.

A page that breaks these rules (a `prints` block after no python block, an unknown need,
the PostgreSQL URL in a block that does not say it needs PostgreSQL) is refused with
`PageError`, naming the file and line, so a mistake in a page fails its test rather
than leaving an example unchecked.

Pages that build on each other (the tutorial) follow two more rules, so that a later
page shows only what is new and its blocks still run on what the earlier pages built:

- **A file the reader builds.** A python block whose fence has a title,
  ```` ```python title="shop.py" ````, is code the page tells the reader to add to the
  end of that file (the site shows the name above the block). The runner adds it to the
  file in the page's folder instead of running it; the blocks that import the file run
  it. With `<!-- replaces: stock = -->` on the line before, the block replaces the
  file's one line that starts with `stock =` (an edit the page asks for).
- **A page that goes on from another.** `<!-- continues: saga.md -->` above a page's
  first block (the name relative to the page) makes its test run that page first, and
  the one that page continues before it, in the same folder: the files and the database
  the earlier pages left are there, as they are in the reader's folder. Each page runs
  in a namespace of its own, with the folder's modules imported afresh, as the reader
  starts a new Python prompt (or `python pageN.py`) for each page; the earlier pages'
  prints are checked too.
- **Blocks pasted at a prompt.** On such a page (one that builds a file or continues
  another), the blocks that run are what the reader pastes into a `python` prompt, so
  each must paste: read line by line as the prompt reads them, where a blank line ends a
  compound statement and a statement right after an indented block is an error (classes
  with blank lines between their methods go into the file instead).

Why files and a chain of pages rather than one namespace carried across pages: the
reader has a module and a database that outlive one page, not a prompt, and a later
page (the console, the command line, Spark's workers) imports the module as a new
process would. Running the earlier pages rather than a saved snapshot keeps each page
tested alone (`-k saga.md`) and the chain honest: a change to page 2 that breaks page 5
fails page 5's test.
"""

from __future__ import annotations

import codeop
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

NEEDS = frozenset({"postgres", "spark", "broker"})
"""What a block may need beyond Python and SQLite."""
POSTGRES_URL = "postgresql://postgres@localhost:5432/eventcraft"
"""The URL a page shows; the test replaces it with one to a fresh schema of its own."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)\s*$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<text>.*?)\s*-->\s*$")
_TITLE = re.compile(r'\btitle="(?P<title>[^"]*)"')
_CONTINUES = re.compile(r"^<!--\s*continues:(?P<page>.*?)-->\s*$", re.M)


class PageError(Exception):
    """A page breaks the conventions its examples are run by."""


@dataclass(frozen=True)
class Fence:
    """One fenced code block of a page."""

    line: int
    """The line of its opening fence (1-based)."""
    language: str
    code: str
    """Its text, less the fence's indentation."""
    comment: str | None
    """The text of the HTML comment on the line right before it, if there is one."""
    after_previous: bool
    """Nothing but blank lines and its comment lie between it and the fence before it."""
    title: str | None = None
    """Its fence's `title="..."`: for a python block, the file the reader adds it to."""


@dataclass
class Example:
    """A python block that runs."""

    line: int
    """The line of its opening fence; its code begins on the next."""
    code: str
    needs: frozenset[str]
    prints: str | None = None
    """The text its `<!-- prints -->` block says it prints, if it has one."""
    file: str | None = None
    """The file the block is added to (its fence's title), relative to the page's folder;
    None for a block that runs."""
    replaces: str | None = None
    """For a file block: the start of the one line of the file it replaces (None: it is
    added to the file's end)."""


@dataclass
class Page:
    path: Path
    examples: list[Example] = field(default_factory=list)
    not_run: list[tuple[int, str]] = field(default_factory=list)
    """The python blocks that do not run: their line, and the reason the page gives."""
    continues: Path | None = None
    """The page it goes on from (`<!-- continues: saga.md -->`), beside it."""

    @property
    def needs(self) -> frozenset[str]:
        return frozenset().union(*(example.needs for example in self.examples))


def fences(text: str) -> list[Fence]:
    """The fenced code blocks of a Markdown text, in order."""
    lines = text.split("\n")
    found: list[Fence] = []
    last_end = -1  # the index of the line that closed the previous block
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        info = opening["info"].strip()
        end = i + 1
        while end < len(lines):
            closing = _FENCE.match(lines[end])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"]
            ):
                break
            end += 1
        body = [_unindent(row, len(indent)) for row in lines[i + 1 : end]]
        before = lines[i - 1] if i > 0 else ""
        comment = _COMMENT.match(before)
        gap = lines[last_end + 1 : i - 1 if comment else i]
        title = _TITLE.search(info)
        found.append(
            Fence(
                line=i + 1,
                language=(info.split() or [""])[0].lstrip("{.").rstrip("}"),
                code="\n".join(body) + "\n",
                comment=comment["text"] if comment else None,
                after_previous=last_end >= 0 and not any(row.strip() for row in gap),
                title=title["title"] if title else None,
            )
        )
        last_end = end
        i = end + 1
    return found


def _unindent(row: str, width: int) -> str:
    """`row` less the fence's indentation (a list item's or an admonition's)."""
    cut = len(row) - len(row.lstrip(" \t"))
    return row[min(cut, width) :]


def read_page(path: Path, text: str | None = None) -> Page:
    """The page at `path` (its `text`, if given), its examples checked against the rules."""
    text = path.read_text(encoding="utf-8") if text is None else text
    page = Page(path)
    blocks = fences(text)
    page.continues = _continues(path, text, blocks[0].line if blocks else None)
    previous: Fence | None = None
    previous_example: Example | None = None
    for block in blocks:
        where = f"{path}:{block.line}"
        comment = block.comment or ""
        if comment.startswith("continues:"):
            comment = ""  # the page's, read above
        if block.language == "python" and block.title is not None:
            previous_example = _file_block(block, comment, where)
            page.examples.append(previous_example)
        elif comment.startswith("replaces:"):
            raise PageError(f"{where}: `<!-- replaces: -->` is for a block with a file's title")
        elif comment == "prints":
            if block.language != "text":
                raise PageError(
                    f"{where}: a `<!-- prints -->` block is ```text, not {block.language!r}"
                )
            if previous is None or previous.language != "python" or not block.after_previous:
                raise PageError(f"{where}: a `<!-- prints -->` block must follow a python block")
            if previous_example is None or previous_example.line != previous.line:
                raise PageError(f"{where}: it follows a python block that does not run")
            if previous_example.file is not None:
                raise PageError(
                    f"{where}: it follows a block added to {previous_example.file}, "
                    "which does not run by itself"
                )
            if previous_example.prints is not None:
                raise PageError(f"{where}: a second `<!-- prints -->` block for one python block")
            previous_example.prints = textwrap.dedent(block.code)
        elif block.language == "python":
            previous_example = None
            if comment.startswith("not run:"):
                reason = comment.removeprefix("not run:").strip()
                if not reason:
                    raise PageError(f"{where}: `<!-- not run: -->` must say why")
                page.not_run.append((block.line, reason))
            else:
                needs = _needs(comment, where)
                if POSTGRES_URL in block.code and "postgres" not in needs:
                    raise PageError(
                        f"{where}: the block names {POSTGRES_URL}; "
                        "say so with `<!-- needs: postgres -->` on the line before it"
                    )
                previous_example = Example(block.line, block.code, needs)
                page.examples.append(previous_example)
        previous = block
    if page.continues is not None or any(e.file for e in page.examples):
        for example in page.examples:
            if example.file is None:
                _pastes(example, f"{path}:{example.line}")
    return page


def _pastes(example: Example, where: str) -> None:
    """Raises PageError unless the block pastes into Python's prompt as it reads it."""
    buffer: list[str] = []
    for number, row in enumerate(example.code.split("\n"), start=1):
        buffer.append(row)
        try:
            whole = codeop.compile_command("\n".join(buffer), "<prompt>", "single")
        except (SyntaxError, ValueError, OverflowError) as error:
            raise PageError(
                f"{where}: pasted at a python prompt, its line {number} fails "
                f"({error.__class__.__name__}: {getattr(error, 'msg', error)}): a blank line "
                "ends an indented block there, and one must follow it before the next statement"
            ) from None
        if whole is not None:
            buffer = []  # a whole statement: the prompt runs it


def _file_block(block: Fence, comment: str, where: str) -> Example:
    """A python block the reader adds to the file its title names."""
    name = block.title or ""
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts:
        raise PageError(f"{where}: title={name!r} is not a file in the page's folder")
    replaces = None
    needs: frozenset[str] = frozenset()
    if comment.startswith("replaces:"):
        replaces = comment.removeprefix("replaces:").strip()
        if not replaces:
            raise PageError(f"{where}: `<!-- replaces: -->` must give the line's start")
    elif comment.startswith("not run:"):
        raise PageError(f"{where}: a block added to {name} runs when {name} is imported")
    else:
        needs = _needs(comment, where)
    if POSTGRES_URL in block.code and "postgres" not in needs:
        raise PageError(
            f"{where}: the block names {POSTGRES_URL}; "
            "say so with `<!-- needs: postgres -->` on the line before it"
        )
    return Example(block.line, block.code, needs, file=name, replaces=replaces)


def _continues(path: Path, text: str, first_fence: int | None) -> Path | None:
    """The page `<!-- continues: name.md -->` names, checked to be above the first block."""
    found = list(_CONTINUES.finditer(text))
    if not found:
        return None
    line = text.count("\n", 0, found[-1].start()) + 1
    where = f"{path}:{line}"
    if len(found) > 1:
        raise PageError(f"{where}: a page continues one page (which may continue another)")
    if first_fence is not None and line > first_fence:
        raise PageError(f"{where}: `<!-- continues: -->` goes above the page's first block")
    name = found[0]["page"].strip()
    if not name.endswith(".md") or "," in name or " " in name:
        raise PageError(f"{where}: `<!-- continues: {name} -->` names one page, `name.md`")
    return path.parent / name


def chain(page: Page) -> list[Page]:
    """The pages `page` continues, the first one first, then `page`: what its test runs.

    Raises:
        PageError: a page it continues is missing, breaks the rules, or leads back to it.
    """
    pages = [page]
    while pages[0].continues is not None:
        earlier = pages[0].continues
        if not earlier.is_file():
            raise PageError(f"{pages[0].path}: it continues {earlier}, which is not there")
        if any(p.path.resolve() == earlier.resolve() for p in pages):
            raise PageError(f"{pages[0].path}: it continues {earlier}, which continues it")
        pages.insert(0, read_page(earlier))
    return pages


def _needs(comment: str, where: str) -> frozenset[str]:
    if not comment:
        return frozenset()
    if not comment.startswith("needs:"):
        raise PageError(
            f"{where}: `<!-- {comment} -->` before a python block; it may say "
            "`needs: ...` or `not run: <reason>`"
        )
    needs = frozenset(n.strip() for n in comment.removeprefix("needs:").split(",") if n.strip())
    unknown = needs - NEEDS
    if unknown or not needs:
        raise PageError(
            f"{where}: `<!-- {comment} -->` names {sorted(unknown) or 'nothing'}; "
            f"a block may need {', '.join(sorted(NEEDS))}"
        )
    return needs


def printed_lines(text: str) -> list[str]:
    """`text` as a prints block is compared: each line stripped, outer blank lines gone."""
    return [row.strip() for row in text.strip().split("\n")] if text.strip() else []
