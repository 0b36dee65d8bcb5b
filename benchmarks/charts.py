"""Charts for the Benchmarks page from the benchmarks' JSON records (`make charts`):

    python -m benchmarks.charts docs/benchmarks/data/*.json --out docs/benchmarks

Each record (`--json PATH` of `benchmarks.scale`, `benchmarks.group_commit`,
`benchmarks.spark` and `benchmarks.floors`; its shape in `benchmarks/record.py`) becomes
PNGs named after it:

- `scale-postgresql.png`, `scale-sqlite.png`: the store beside the plain table as the log
  grows (single append p50, batches of 100, global pages) and the ratios;
- `group-commit.png`: events/s by concurrent callers, grouped, ungrouped, async and raw;
- `spark.png`: replay events/s by cores for each source and fold, the in-process rebuild
  as a line;
- `floors.png`: each measure's ratio to its floor (`benchmarks.floors`), the rounds and
  their median beside the goal.

The same record gives the same bytes: no date or version is written into a PNG, and
the style is matplotlib's default whatever the local `matplotlibrc` says. A file that is
not a record, or not of the shape its benchmark writes, fails with one message naming
it; a record of another benchmark is skipped, with a line saying so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, and the same output everywhere

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .record import FORMAT

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

STYLE: dict[RcKeyType, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.family": "DejaVu Sans",  # matplotlib's own font: the same glyphs on any machine
    "font.size": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "svg.hashsalt": "eventcraft",
}
"""On top of matplotlib's defaults; `savefig` also leaves out the Software tag."""

OURS, PLAIN = "#1f77b4", "#7f7f7f"
BACKEND_NAMES = {"postgresql": "PostgreSQL", "postgres": "PostgreSQL", "sqlite": "SQLite"}


class MalformedRecord(Exception):
    """A file that is not a benchmark record this script draws."""


def figures(record: dict[str, Any]) -> dict[str, Figure]:
    """The charts of one record, by file name; none for a benchmark without charts."""
    draw = DRAWERS.get(record["benchmark"])
    if draw is None:
        return {}
    found = draw(record)
    for figure in found.values():
        figure.text(0.01, 0.01, caption(record), fontsize=8, color="#555555")
    return found


def caption(record: dict[str, Any]) -> str:
    """Where and when: the date, the machine, its load at the start and end, the commit."""
    machine = record["machine"]
    start, end = machine["load_average"]["start"][0], machine["load_average"]["end"][0]
    versions = record.get("versions", {})
    postgres = versions.get("postgresql", "").split(" ")[0]
    commit = record["commit"][:7] + (" + uncommitted changes" if record.get("uncommitted") else "")
    return (
        f"{record['started'][:10]}, {machine['cpus']} CPUs, load average {start:.1f} at the "
        f"start and {end:.1f} at the end (1 min){', PostgreSQL ' + postgres if postgres else ''}"
        f", SQLite {versions.get('sqlite', '?')}, commit {commit}"
    )


def scale_figures(record: dict[str, Any]) -> dict[str, Figure]:
    """For each backend: our store and the plain table across sizes, and the ratios."""
    found = {}
    for backend, grown in record["results"].items():
        sizes = [at["size"] for at in grown["sizes"]]
        metrics = [{m["metric"]: m for m in at["metrics"]} for at in grown["sizes"]]
        figure, axes = plt.subplots(2, 2, figsize=(10, 7.6))
        name = BACKEND_NAMES.get(backend, backend)
        figure.suptitle(f"The store at scale on {name}: eventcraft beside a plain table")
        panels = [
            ("single append p50", "Single append, median", "ms per append"),
            ("batch of 100", "Batch of 100 events in one transaction", "events/s"),
            ("global page", "Global page of 1,000 events", "ms per page"),
        ]
        for ax, (metric, title, unit) in zip(axes.flat, panels, strict=False):
            for side, key, colour in (
                ("eventcraft", "eventcraft", OURS),
                ("plain table", "reference", PLAIN),
            ):
                ax.plot(sizes, [m[metric][key] for m in metrics], "o-", color=colour, label=side)
            _size_axis(ax, sizes)
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(FuncFormatter(_number))
            ax.set(title=title, ylabel=unit)
            ax.legend()
        ratios = axes.flat[3]
        lines = ["single append p50", "batch of 100", "global page", "bytes per event"]
        for n, metric in enumerate(lines):
            colour = f"C{n + 1}"
            ratios.plot(
                sizes, [m[metric]["ratio"] for m in metrics], "o-", color=colour, label=metric
            )
            goal = metrics[0][metric].get("goal")
            if goal:
                ratios.axhline(goal, color=colour, linestyle=":", linewidth=1)
        ratios.axhline(1, color="black", linewidth=0.8, label="level with the plain table")
        _size_axis(ratios, sizes)
        ratios.set_ylim(bottom=0)
        ratios.set(
            title="Ratio to the plain table (dotted: the goal)",
            ylabel="x the plain table (time, bytes; rate: inverse)",
        )
        ratios.legend()
        figure.tight_layout(rect=(0, 0.03, 1, 1))
        found[f"scale-{backend}.png"] = figure
    return found


def group_commit_figures(record: dict[str, Any]) -> dict[str, Figure]:
    """Events/s by concurrent callers, one panel per backend."""
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for measured in record["results"]["singles"]:
        by_backend.setdefault(measured["backend"], []).append(measured)
    figure, axes = plt.subplots(1, len(by_backend), figsize=(10, 4.6), squeeze=False)
    figure.suptitle("Group commit: single-event appends, each caller to a stream of its own")
    styles = {
        "grouped": ("C0", "o-"),
        "ungrouped": ("C1", "s-"),
        "async grouped": ("C2", "^-"),
        "raw": (PLAIN, "D--"),
    }
    for ax, (backend, runs) in zip(axes[0], by_backend.items(), strict=True):
        runs = sorted(runs, key=lambda run: run["callers"])
        callers = [run["callers"] for run in runs]
        names = [c["name"] for c in runs[0]["contenders"]]
        for name in names:
            rates = [_named(run["contenders"], name)["events_per_s"] for run in runs]
            colour, style = styles.get(name, ("C3", "o-"))
            label = {"raw": "raw driver, one insert a transaction"}.get(name, name)
            ax.plot(callers, rates, style, color=colour, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(callers, [str(c) for c in callers])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(_number))
        ax.set(
            title=BACKEND_NAMES.get(backend, backend),
            xlabel="concurrent callers (threads; async: tasks)",
            ylabel="events/s",
        )
        ax.legend()
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    return {"group-commit.png": figure}


SOURCES = {
    ("from the Parquet archive", "apply"): ("archive, apply fold", "C0", "o-"),
    ("from the Parquet archive", "reducers"): ("archive, reducer fold", "C0", "s--"),
    ("from the archive, data unparsed", "reducers"): ("archive unparsed, reducers", "C2", "s--"),
    ("from PostgreSQL", "apply"): ("PostgreSQL (JDBC), apply fold", "C1", "o-"),
    ("from PostgreSQL", "reducers"): ("PostgreSQL (JDBC), reducer fold", "C1", "s--"),
}
"""How each replay's line looks: colour by source, dashes for reducer folds."""


def spark_figures(record: dict[str, Any]) -> dict[str, Figure]:
    """Replay events/s by cores, one panel per log size, the in-process rebuild as lines."""
    sizes = record["results"]["sizes"]
    figure, axes = plt.subplots(1, len(sizes), figsize=(10, 6), squeeze=False, sharey=True)
    figure.suptitle("Spark replay of a balance-per-account fold, local mode, by cores")
    for ax, at in zip(axes[0], sizes, strict=True):
        cores = sorted(run["cores"] for run in at["cores"])
        lines: dict[tuple[str, str], dict[int, float]] = {}
        for run in at["cores"]:
            for replay in run["replays"]:
                line = lines.setdefault((replay["source"], replay["fold"]), {})
                line[run["cores"]] = replay["events_per_s"]
        for key, by_cores in lines.items():
            label, colour, style = SOURCES.get(key, (f"{key[0]}, {key[1]}", "C4", "o-"))
            counts = sorted(by_cores)
            ax.plot(counts, [by_cores[c] for c in counts], style, color=colour, label=label)
        for rebuild in at["in_process"]:
            style = "-" if rebuild["fold"] == "apply" else "--"
            ax.axhline(
                rebuild["events_per_s"],
                color="black",
                linestyle=style,
                linewidth=1,
                label=f"in-process rebuild, {rebuild['fold']}",
            )
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(_number))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(cores, [str(c) for c in cores])
        ax.set_xlim(min(cores) - 0.25, max(cores) + 0.25)
        ax.set(title=f"{at['size']:,} events", xlabel="Spark cores (local[n])")
    axes[0][0].set_ylabel("events/s (log scale)")
    # One legend under the panels, of every line any panel has: none covers a curve.
    legend: dict[str, Artist] = {}
    for ax in axes[0]:
        handles, labels = ax.get_legend_handles_labels()
        legend.update(zip(labels, handles, strict=True))
    figure.legend(
        list(legend.values()), list(legend), loc="lower center", ncol=4, bbox_to_anchor=(0.5, 0.045)
    )
    figure.tight_layout(rect=(0, 0.15, 1, 1))
    return {"spark.png": figure}


MET, MISSED = "#2ca02c", "#d62728"


def floors_figures(record: dict[str, Any]) -> dict[str, Figure]:
    """Each measure's ratio to its floor: every round, their median (green where it meets
    the goal, red where not), the spread, and the goal as a bar; one row a measure."""
    measures = record["results"]["measures"]
    figure, ax = plt.subplots(figsize=(10, 0.42 * len(measures) + 1.6))
    figure.suptitle("eventcraft against floors measured in the same run: the ratio and its goal")
    rows = list(range(len(measures)))[::-1]  # the first measure at the top
    for row, measure in zip(rows, measures, strict=True):
        rounds = [r["ratio"] for r in measure["rounds"]]
        spread = measure["spread"]
        colour = MET if measure["met"] else MISSED
        ax.plot([spread["min"], spread["max"]], [row, row], "-", color=colour, linewidth=1.5)
        ax.plot(rounds, [row] * len(rounds), "o", color=PLAIN, markersize=3.5)
        ax.plot([measure["ratio"]], [row], "o", color=colour, markersize=8)
        ax.plot([measure["goal"]], [row], "|", color="black", markersize=16, markeredgewidth=2)
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    low = min([m["spread"]["min"] for m in measures] + [m["goal"] for m in measures])
    high = max([m["spread"]["max"] for m in measures] + [m["goal"] for m in measures])
    ax.set_xlim(low / 1.3, high * 1.3)
    labels = [
        f"{m['measure']} ({'>=' if m['better'] == 'higher' else '<='} {m['goal']:g}x)"
        for m in measures
    ]
    ax.set_yticks(rows, labels)
    ax.set_ylim(-0.7, len(measures) - 0.3)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(
        "eventcraft's figure over the floor's (log scale; time and bytes: lower is better)"
    )
    legend = [
        Line2D([], [], marker="o", color=MET, linestyle="", label="median of the rounds, goal met"),
        Line2D([], [], marker="o", color=MISSED, linestyle="", label="median, goal missed"),
        Line2D([], [], marker="o", color=PLAIN, markersize=3.5, linestyle="", label="a round"),
        Line2D([], [], marker="|", color="black", markersize=12, linestyle="", label="the goal"),
    ]
    ax.legend(handles=legend, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    return {"floors.png": figure}


DRAWERS: dict[str, Callable[[dict[str, Any]], dict[str, Figure]]] = {
    "scale": scale_figures,
    "group_commit": group_commit_figures,
    "spark": spark_figures,
    "floors": floors_figures,
}


def load(path: Path) -> dict[str, Any]:
    """The record in `path`, or `MalformedRecord` saying what is wrong with it."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedRecord(f"not readable as JSON: {error}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise MalformedRecord(f'not a benchmark record (its "format" is not {FORMAT!r})')
    return record


def write(paths: Iterable[Path], out: Path) -> list[Path]:
    """The charts of each record in `paths`, as PNGs in `out`; the files written."""
    written = []
    out.mkdir(parents=True, exist_ok=True)
    with plt.style.context("default"), plt.rc_context(STYLE):
        for path in paths:
            try:
                record = load(path)
                drawn = figures(record)
            except MalformedRecord as error:
                raise MalformedRecord(f"{path}: {error}") from None
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
                detail = f"missing {error}" if isinstance(error, KeyError) else str(error)
                raise MalformedRecord(
                    f"{path}: not the shape its benchmark writes ({detail})"
                ) from None
            if not drawn:
                # Other benchmarks write records into the same folder: not an error.
                print(f"{path}: no charts for {record['benchmark']!r}, skipped", file=sys.stderr)
            for name, figure in drawn.items():
                figure.savefig(out / name, metadata={"Software": None})
                plt.close(figure)
                written.append(out / name)
    return written


def _named(found: Sequence[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(c for c in found if c["name"] == name)


def _size_axis(ax: Axes, sizes: Sequence[int]) -> None:
    ax.set_xscale("log")
    ax.set_xticks(sizes, [_number(size) for size in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("events in the log (log scale)")


def _number(value: float, _position: object = None) -> str:
    """10000 -> 10k, 2500000 -> 2.5M: the axes' labels."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:g}{suffix}"
    return f"{value:g}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path, help="JSON records of benchmark runs")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"), help="for the PNGs")
    args = parser.parse_args(argv)
    try:
        written = write(args.records, args.out)
    except MalformedRecord as error:
        sys.exit(f"benchmarks.charts: {error}")
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
