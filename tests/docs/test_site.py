"""The documentation site builds with `mkdocs build --strict` (no broken link, anchor or
reference), loads nothing from the network, and its reference pages show what the code
has: each public name, each exception, each command.

The site is built once for the module (a few seconds to a minute on a busy machine):
marked `docs_build`, so a quick run can leave it out (`-m "not docs_build"`).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import click
import pytest

from ..conftest import missing
from .reference import ROOT
from .test_reference import FACES, STILL_UNDOCUMENTED, faces

# slow: The site built whole, strictly (mkdocs, tens of seconds): make test builds it.
pytestmark = [pytest.mark.docs_build, pytest.mark.slow]

EXTERNAL = re.compile(r"^(?:https?:)?//", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The site, built with --strict into a folder of the test's own."""
    try:
        import mkdocs  # noqa: F401
    except ImportError as error:
        missing(f"the docs extra is not installed ({error}): pip install -e '.[docs]'")
    folder = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(folder)]
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr}{done.stdout}"
    print(f"mkdocs build --strict: {seconds:.1f} s")
    yield folder


@pytest.mark.slow
def test_the_site_builds_strictly_with_a_page_for_each_section(site: Path) -> None:
    assert (site / "index.html").is_file()
    for page in ("reference/index.html", "reference/cli.html", "ARCHITECTURE.html"):
        assert (site / page).is_file(), page


class _Loads(HTMLParser):
    """What an HTML page makes the browser fetch by itself: scripts, stylesheets, fonts,
    images, frames, and URLs written in its inline scripts and styles."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []
        self._inline: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed"):
            self.loaded.append(values.get("src") or "")
        rel = set((values.get("rel") or "").split())
        if tag == "link" and rel & {"stylesheet", "preload", "prefetch", "icon", "manifest"}:
            self.loaded.append(values.get("href") or "")
        if tag in ("script", "style"):
            self._inline = ""
        self.loaded.extend(re.findall(r"url\(['\"]?([^'\")]+)", values.get("style") or ""))

    def handle_data(self, data: str) -> None:
        if self._inline is not None:
            self._inline += data

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._inline is not None:
            self.loaded.extend(_urls_in_code(self._inline))
            self._inline = None


def _urls_in_code(text: str) -> list[str]:
    """URLs a script or stylesheet may fetch: `url(...)`, `@import`, and quoted http(s)
    addresses (a script's `src` set at run time)."""
    found = re.findall(r"url\(\s*['\"]?([^'\")\s]+)", text)
    found += re.findall(r"@import\s+['\"]([^'\"]+)", text)
    found += re.findall(r"['\"]((?:https?:)?//[^'\"\s]+)['\"]", text)
    return [url for url in found if not url.startswith("http://www.w3.org/")]


def external_loads(html: str) -> list[str]:
    parser = _Loads()
    parser.feed(html)
    return [url for url in parser.loaded if EXTERNAL.match(url)]


def test_the_check_finds_a_page_that_loads_from_the_network() -> None:
    page = (
        '<html><head><link rel="stylesheet" href="https://fonts.googleapis.com/css?x">'
        '<link rel="canonical" href="https://example.org/">'
        '<script src="assets/local.js"></script>'
        "<script>var s=document.createElement('script');s.src='https://unpkg.com/x'</script>"
        '</head><body><a href="https://github.com/">a link is no load</a>'
        '<img src="//cdn.example.org/x.png"></body></html>'
    )
    assert external_loads(page) == [
        "https://fonts.googleapis.com/css?x",
        "https://unpkg.com/x",
        "//cdn.example.org/x.png",
    ]


@pytest.mark.slow
def test_no_page_loads_a_font_script_or_stylesheet_from_the_network(site: Path) -> None:
    loads = {
        str(page.relative_to(site)): found
        for page in sorted(site.rglob("*.html"))
        if (found := external_loads(page.read_text(encoding="utf-8")))
    }
    assert loads == {}
    for sheet in sorted(site.rglob("*.css")):
        text = sheet.read_text(encoding="utf-8")
        assert [u for u in _urls_in_code(text) if EXTERNAL.match(u)] == [], sheet


def _html_of(site: Path, page: Path) -> str:
    relative = page.relative_to(ROOT / "docs").with_suffix(".html")
    return (site / relative).read_text(encoding="utf-8")


def test_an_api_page_shows_each_public_name_of_its_package_and_no_other(site: Path) -> None:
    for face in faces():
        html = _html_of(site, face.page)
        shown = set(re.findall(rf'id="{re.escape(face.module)}\.(\w+)"', html))
        names = {
            name
            for name in face.public_names()
            if not name.startswith("__") and f"{face.module}.{name}" not in STILL_UNDOCUMENTED
        }
        assert shown == names, f"{face.page.name}: shown but not public, public but not shown"


def test_the_exceptions_page_names_every_exception_of_every_package(site: Path) -> None:
    html = (site / "reference" / "exceptions.html").read_text(encoding="utf-8")
    for face in sorted(FACES):
        module = importlib.import_module(face)
        for name in getattr(module, "__all__", ()):
            found = getattr(module, name)
            if isinstance(found, type) and issubclass(found, BaseException):
                assert f"<code>{name}</code>" in html, f"{face}.{name}"


def _commands(group: click.Group, path: str) -> Iterator[str]:
    for name, command in sorted(group.commands.items()):
        yield f"{path} {name}"
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} {name}")


def test_the_command_line_page_shows_every_command(site: Path) -> None:
    from eventcraft.cli.main import cli

    html = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    for command in _commands(cli, "eventcraft"):
        assert f"{command} [OPTIONS]" in html, command
