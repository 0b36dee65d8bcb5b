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
"""

from __future__ import annotations

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


@dataclass
class Example:
    """A python block that runs."""

    line: int
    """The line of its opening fence; its code begins on the next."""
    code: str
    needs: frozenset[str]
    prints: str | None = None
    """The text its `<!-- prints -->` block says it prints, if it has one."""


@dataclass
class Page:
    path: Path
    examples: list[Example] = field(default_factory=list)
    not_run: list[tuple[int, str]] = field(default_factory=list)
    """The python blocks that do not run: their line, and the reason the page gives."""

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
        found.append(
            Fence(
                line=i + 1,
                language=(info.split() or [""])[0].lstrip("{.").rstrip("}"),
                code="\n".join(body) + "\n",
                comment=comment["text"] if comment else None,
                after_previous=last_end >= 0 and not any(row.strip() for row in gap),
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
    previous: Fence | None = None
    previous_example: Example | None = None
    for block in fences(text):
        where = f"{path}:{block.line}"
        comment = block.comment or ""
        if comment == "prints":
            if block.language != "text":
                raise PageError(
                    f"{where}: a `<!-- prints -->` block is ```text, not {block.language!r}"
                )
            if previous is None or previous.language != "python" or not block.after_previous:
                raise PageError(f"{where}: a `<!-- prints -->` block must follow a python block")
            if previous_example is None or previous_example.line != previous.line:
                raise PageError(f"{where}: it follows a python block that does not run")
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
    return page


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
