"""The report of a profile (docs/PROFILING.md, *Report*): PNG pictures drawn with matplotlib
(the ``plots`` extra, imported only here and only when drawing) and one Markdown page,
``report.md``, that shows them with the findings and the per-rank and per-file tables.

matplotlib draws on the Agg backend; without it, drawing raises an error naming the extra to
install. :func:`format_page` (pure) makes the page's Markdown.
"""

from __future__ import annotations

import os
from typing import Any

from ..plan import PLAN_FIELDS
from .counters import SIZE_BUCKETS
from .findings import (
    Finding,
    MiB,
    dropped,
    findings,
    per_file,
    per_rank,
    rank_windows,
    rate_series,
    size_histogram,
    trace_operations,
    traced,
)

PAGE = "report.md"
#: Every picture the report can draw, with the caption the page gives it.
PICTURES = {
    "timeline.png": "Per-rank timeline of reads and writes",
    "rate.png": "Aggregate rate over time",
    "sizes.png": "Access sizes (Darshan's buckets)",
    "ranks.png": "Bytes and time per rank",
    "files.png": "Bytes and time per file",
    "phases.png": "Phases per rank",
}
#: The per-file picture and table show at most this many files (those that moved the most).
MAX_FILES = 30
#: A picture's largest side (inches, at 100 dpi): with thousands of ranks the bars get thin
#: rather than the picture huge; ranks are labelled one by one up to MAX_RANK_LABELS.
MAX_INCHES = 30.0
MAX_RANK_LABELS = 64
COLORS = {"write": "tab:red", "read": "tab:blue", "meta": "tab:gray"}
MISSING_MATPLOTLIB = (
    "the report's pictures need matplotlib, which h5subfile's 'plots' extra installs: "
    "pip install 'h5subfile[plots]' (--text needs nothing more)"
)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; ImportError saying which extra installs it."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(MISSING_MATPLOTLIB) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_report(doc: dict[str, Any], folder: str, source: str = "") -> list[str]:
    """Draw the pictures the profile allows into ``folder`` (made if missing; pictures of an
    earlier report that this one does not draw are removed) and write the page; return the
    file names written, the page last."""
    plt = pyplot()
    found = findings(doc)  # before anything is written: a document that is no profile fails here
    os.makedirs(folder, exist_ok=True)
    for name in PICTURES:
        if os.path.exists(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name))
    drawn = []
    for name, draw in (
        ("timeline.png", _timeline),
        ("rate.png", _rate),
        ("sizes.png", _sizes),
        ("ranks.png", _ranks),
        ("files.png", _files),
        ("phases.png", _phases),
    ):
        fig = draw(plt, doc)
        if fig is None:
            continue
        fig.tight_layout()
        fig.savefig(os.path.join(folder, name), dpi=100)
        plt.close(fig)
        drawn.append(name)
    with open(os.path.join(folder, PAGE), "w") as page:
        page.write(format_page(doc, found, drawn, source))
    return [*drawn, PAGE]


# ---------------------------------------------------------------------------------------------
# Pictures: each returns a figure, or None when the profile has nothing to draw


def _timeline(plt: Any, doc: dict[str, Any]) -> Any:
    """From the trace: every operation as a bar on its rank's row. Without one: each rank's
    session (first open to last close) as a line and its first-to-last write and read as
    bars, with the seconds actually spent in them."""
    from matplotlib.patches import Patch

    ranks = [row["rank"] for row in doc["ranks"]]
    labels: dict[str, str] = {}
    fig, ax = plt.subplots(figsize=(11, min(1.6 + 0.4 * max(len(ranks), 2), MAX_INCHES)))
    if traced(doc):
        bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
        for rank, kind, _, start, end in trace_operations(doc):
            bars.setdefault((rank, kind), []).append((start, max(end - start, 1e-6)))
        for (rank, kind), spans in sorted(bars.items()):
            offset = 0.05 if kind == "write" else -0.35
            ax.broken_barh(spans, (rank + offset, 0.3), color=COLORS[kind])
            labels[f"{kind}s"] = COLORS[kind]
        ax.set_title("Every traced read and write, per rank")
    else:
        busy = {row["rank"]: row for row in per_rank(doc)}
        for row in rank_windows(doc):
            r = row["rank"]
            if row["open"] and row["close"]:
                ax.plot([row["open"][0], row["close"][1]], [r, r], color=COLORS["meta"], lw=1)
            for kind, offset in (("write", 0.05), ("read", -0.35)):
                if row[kind]:
                    start, end = row[kind]
                    ax.broken_barh([(start, end - start)], (r + offset, 0.3), color=COLORS[kind])
                    ax.text(end, r + offset + 0.15, f" {busy[r][f'{kind}_time']:.3f} s busy")
                    labels[f"first to last {kind}"] = COLORS[kind]
        labels["first open to last close (line)"] = COLORS["meta"]
        ax.set_title("Per rank, from the counters (no trace kept)")
    ax.set_xlim(left=0)
    ax.set_ylim(min(ranks, default=0) - 0.6, max(ranks, default=0) + 0.6)
    if len(ranks) <= MAX_RANK_LABELS:
        ax.set_yticks(ranks, [str(r) for r in ranks])
    ax.set_ylabel("rank")
    ax.set_xlabel(_time_axis(doc))
    handles = [Patch(color=color, label=label) for label, color in labels.items()]
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _time_axis(doc: dict[str, Any]) -> str:
    """What time 0 is: the profiled session's open, or a Darshan log's job start."""
    return (
        "seconds since the job's start (Darshan)"
        if doc.get("source")
        else ("seconds since the session's open")
    )


def _rate(plt: Any, doc: dict[str, Any]) -> Any:
    series = rate_series(doc)
    if not series["edges"]:
        return None
    fig, ax = plt.subplots(figsize=(10, 3.6))
    edges = series["edges"]
    for kind in ("write", "read"):
        if any(series[kind]):
            ax.stairs(series[kind], edges, color=COLORS[kind], label=f"{kind} (all ranks)")
    ax.set_xlabel(_time_axis(doc))
    ax.set_ylabel("MiB/s")
    ax.set_title(f"Aggregate rate over time, from the trace ({len(edges) - 1} intervals)")
    ax.legend(fontsize=8)
    return fig


def _sizes(plt: Any, doc: dict[str, Any]) -> Any:
    counts = size_histogram(doc)
    fig, ax = plt.subplots(figsize=(10, 3.8))
    x = list(range(len(SIZE_BUCKETS)))
    for kind, shift in (("write", -0.2), ("read", 0.2)):
        bars = ax.bar(
            [i + shift for i in x], counts[kind], width=0.4, color=COLORS[kind], label=kind
        )
        ax.bar_label(bars, labels=[str(c) if c else "" for c in counts[kind]], fontsize=7)
    ax.set_xticks(x, [b.replace("_", "-") for b in SIZE_BUCKETS], fontsize=8)
    ax.set_xlabel("operation size (bytes; K = 1024)")
    ax.set_ylabel("operations (all ranks)")
    ax.set_title("Access sizes")
    ax.legend(fontsize=8)
    return fig


def _ranks(plt: Any, doc: dict[str, Any]) -> Any:
    rows = per_rank(doc)
    return _bytes_and_time(plt, [str(r["rank"]) for r in rows], rows, "rank", "per rank")


def _files(plt: Any, doc: dict[str, Any]) -> Any:
    rows = _top_files(doc)
    if not rows:
        return None
    labels = [_short(row["path"]) for row in rows]
    fig = _bytes_and_time(plt, labels, rows, "", "per file", horizontal=True)
    return fig


def _bytes_and_time(
    plt: Any,
    labels: list[str],
    rows: list[dict[str, Any]],
    axis: str,
    what: str,
    horizontal: bool = False,
) -> Any:
    """Two panels: bytes read and written, and read, write and meta seconds, stacked."""
    wide = min(max(8.0, 0.4 * len(rows) + 4), MAX_INCHES)
    size = (12, 1.5 + 0.3 * len(rows)) if horizontal else (wide, 4.2)
    fig, (left, right) = plt.subplots(1, 2, figsize=size)
    x = list(range(len(rows)))
    for ax, parts, unit in (
        (left, (("write", "bytes_written"), ("read", "bytes_read")), "MiB"),
        (right, (("write", "write_time"), ("read", "read_time"), ("meta", "meta_time")), "s"),
    ):
        base = [0.0] * len(rows)
        for kind, key in parts:
            values = [row[key] / (MiB if unit == "MiB" else 1) for row in rows]
            bar = ax.barh if horizontal else ax.bar
            where = {"left": base} if horizontal else {"bottom": base}
            bar(x, values, color=COLORS[kind], label=kind, **where)
            base = [b + v for b, v in zip(base, values)]
        label = f"{'bytes' if unit == 'MiB' else 'time'} ({unit})"
        if horizontal:
            ax.set_yticks(x, labels, fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(label)
        else:
            if len(rows) <= MAX_RANK_LABELS:
                ax.set_xticks(x, labels, fontsize=8)
            ax.set_xlabel(axis)
            ax.set_ylabel(label)
        ax.set_title(f"{'Bytes' if unit == 'MiB' else 'I/O time'} {what}")
        ax.legend(fontsize=8)
    return fig


def _phases(plt: Any, doc: dict[str, Any]) -> Any:
    rows = per_rank(doc)
    names = sorted({name for row in rows for name in row["phases"]})
    if not names:
        return None
    wide = min(max(8.0, 0.3 * len(rows) * len(names) + 4), MAX_INCHES)
    fig, ax = plt.subplots(figsize=(wide, 4.2))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [row["phases"].get(name, {}).get("seconds", 0.0) for row in rows]
        shift = (i - (len(names) - 1) / 2) * width
        ax.bar([j + shift for j in range(len(rows))], values, width=width, label=name)
    if len(rows) <= MAX_RANK_LABELS:
        ax.set_xticks(range(len(rows)), [str(row["rank"]) for row in rows])
    ax.set_xlabel("rank")
    ax.set_ylabel("seconds (phases overlap: not a partition)")
    ax.set_title("h5subfile's phases per rank")
    ax.legend(fontsize=8)
    return fig


def _top_files(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = per_file(doc)
    rows.sort(key=lambda row: -(row["bytes_read"] + row["bytes_written"] + row["io_time"]))
    return rows[:MAX_FILES]


def _short(path: str) -> str:
    """A file's folder and name (the rest of its path is the same for most files)."""
    return os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))


# ---------------------------------------------------------------------------------------------
# The page


def format_page(
    doc: dict[str, Any], found: list[Finding], drawn: list[str], source: str = ""
) -> str:
    """The Markdown page: a summary, the findings, every picture in ``drawn`` (with what it
    shows, and what is missing without a trace), and the per-rank and per-file tables."""
    totals = doc["totals"]
    log = doc.get("source")
    span = "the job's run time (Darshan's)" if log else "from the session's open to its close"
    lines = [
        f"# I/O profile{': ' + source if source else ''}",
        "",
        f"{doc['nprocs']} ranks, {doc['run_time']:.3f} s {span}; "
        f"{totals['bytes_written'] / MiB:.1f} MiB written in {totals['writes']} writes, "
        f"{totals['bytes_read'] / MiB:.1f} MiB read in {totals['reads']} reads, over "
        f"{len(doc['files'])} files (counters: Darshan's POSIX module, docs/PROFILING.md).",
        "",
        *_source_lines(doc),
        "## Findings",
        "",
        *_finding_lines(found),
        "## Pictures",
        "",
        *_picture_lines(doc, drawn),
        *_rank_table(doc),
        *_file_table(doc),
    ]
    return "\n".join(lines) + "\n"


def _source_lines(doc: dict[str, Any]) -> list[str]:
    """For a Darshan log: which log, and what it cannot show, each with why."""
    log = doc.get("source")
    if not log:
        return []
    lines = [
        f"Read from a {log['format']} log (`{log['log']}`, format {log['log_version']}, "
        f"program `{log['exe'] or '-'}`). What the log cannot show:",
        "",
    ]
    lines += [f"- {what}: {why}" for what, why in doc.get("unavailable", {}).items()]
    return lines + [""]


def _finding_lines(found: list[Finding]) -> list[str]:
    if not found:
        return [
            "None: no check's threshold was reached (small accesses, unaligned accesses, "
            "metadata on one rank, imbalance across ranks or subfiles, time lost waiting; "
            "docs/PROFILING.md lists the thresholds).",
            "",
        ]
    fields = {field.name: field for field in PLAN_FIELDS}
    lines = []
    for i, item in enumerate(found, 1):
        named = ", ".join(
            f"`{name}` (`{fields[name].flag}`, `{fields[name].env}`)" for name in item.fields
        )
        lines += [
            f"{i}. **{item.title}** (`{item.key}`)",
            f"   - Measured: {item.evidence}.",
            f"   - Why it matters: {item.why}.",
            f"   - What to change: {item.advice}.",
            f"   - Plan fields: {named}.",
            "",
        ]
    return lines


def _picture_lines(doc: dict[str, Any], drawn: list[str]) -> list[str]:
    lines = []
    if not traced(doc):
        keep = (
            "Darshan's DXT module keeps one"
            if doc.get("source")
            else ("`H5SUBFILE_PROFILE_TRACE=N` keeps one")
        )
        lines += [
            f"No trace was kept ({keep}): the timeline shows what "
            "the counters allow (each rank's first open to last close, and its first to last "
            "write and read, with the seconds spent in them), and the rate over time, which "
            "needs every operation's time, is not drawn.",
            "",
        ]
    elif dropped(doc):
        lines += [
            f"The ranks' traces dropped {dropped(doc)} operations (the trace is bounded per "
            "rank): the timeline and the rate over time show the operations kept.",
            "",
        ]
    for name in drawn:
        lines += [f"### {PICTURES[name]}", "", f"![{PICTURES[name]}]({name})", ""]
    if "phases.png" not in drawn:
        lines += ["No phase was timed on any rank, so there is no phase picture.", ""]
    return lines


def _rank_table(doc: dict[str, Any]) -> list[str]:
    lines = [
        "## Per rank",
        "",
        "| rank | MiB written | MiB read | writes | reads | write s | read s | meta s "
        "| metadata ops |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in per_rank(doc):
        lines.append(
            f"| {row['rank']} | {row['bytes_written'] / MiB:.2f} | {row['bytes_read'] / MiB:.2f} "
            f"| {row['writes']} | {row['reads']} | {row['write_time']:.4f} "
            f"| {row['read_time']:.4f} | {row['meta_time']:.4f} | {row['metadata_ops']} |"
        )
    return [*lines, ""]


def _file_table(doc: dict[str, Any]) -> list[str]:
    rows = _top_files(doc)
    shown = "" if len(rows) == len(doc["files"]) else f" ({len(rows)} that moved the most)"
    lines = [
        f"## Per file{shown}",
        "",
        "| file | ranks | MiB written | MiB read | writes | reads | I/O s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['path']} | {row['ranks']} | {row['bytes_written'] / MiB:.2f} "
            f"| {row['bytes_read'] / MiB:.2f} | {row['writes']} | {row['reads']} "
            f"| {row['io_time']:.4f} |"
        )
    return [*lines, ""]
