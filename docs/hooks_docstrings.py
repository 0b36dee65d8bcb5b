"""A griffe extension (mkdocs.yml, mkdocstrings' `extensions:`): the docstrings' literal
blocks as Markdown code blocks.

The docstrings introduce an example the reStructuredText way, a paragraph ending in
`::` and an indented block after it, which reads well in `help()` and in an editor.
On the site the `::` becomes `:` (a lone `::` goes) and the block a fenced one,
highlighted as Python when it parses as Python and shown as text otherwise (a drawing
of an exception tree, a JSON shape).
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import griffe


def fenced(text: str) -> str:
    """`text` with each `::` literal block written as a fenced code block."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::"):
            out.append(line)
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        block_start = i + 1
        while block_start < len(lines) and not lines[block_start].strip():
            block_start += 1
        end = block_start
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
        ):
            end += 1
        while end > block_start and not lines[end - 1].strip():
            end -= 1
        if end == block_start:  # no indented block: not a literal block
            out.append(line)
            i += 1
            continue
        lead = line.rstrip()[:-2].rstrip()
        if lead.strip():
            out.extend([lead + ":", ""])
        code = textwrap.dedent("\n".join(lines[block_start:end]))
        language = "python" if _parses(code) else "text"
        prefix = " " * indent
        out.append(f"{prefix}```{language}")
        out.extend(prefix + row if row else "" for row in code.split("\n"))
        out.append(f"{prefix}```")
        i = end
    return "\n".join(out)


def _parses(code: str) -> bool:
    try:
        compile(code, "<docstring>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return False
    return True


class LiteralBlocks(griffe.Extension):
    """Rewrites each object's docstring as `fenced` does, when it is read."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and "::" in obj.docstring.value:
            obj.docstring.value = fenced(obj.docstring.value)
