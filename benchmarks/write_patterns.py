"""Every write pattern against its baseline, for two checkouts in one series
(docs/BENCHMARKS.md, "Write patterns against their baselines, before and after"), and the
reads of h5subfile's own reader against raw POSIX reads of the same bytes (``bench -r -C``).

Each repetition runs every command of :data:`COMMANDS` once per checkout, the checkouts in an
order that rotates from one repetition to the next; the last checkout runs twice (NEW and
NEW'), so that NEW' / NEW shows the noise (the null comparison). Every run is a fresh
``mpiexec`` of ``python -m h5subfile`` with the checkout's ``src`` first on ``PYTHONPATH``,
into a fresh folder deleted after it (then ``sync``, untimed); its metric is the command's
own (its JSON), not the process's time. The ratios of :data:`RATIOS` pair two commands of the
same checkout in the same repetition (IOR's bandwidth against raw POSIX's, the time per step
writing behind against the default's), as the bench's own comparison table does.

Run (2 ranks: the machine's cores; BASE a worktree of the commit before, NEW this one):

    git worktree add /tmp/base <commit>
    .venv/bin/python benchmarks/write_patterns.py --checkout BASE=/tmp/base/src \\
        --checkout NEW=src --reps 5 --json docs/write-patterns.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docplot import run_facts  # noqa: E402

TITLE = "Write patterns against their baselines, before and after"
ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
MPIEXEC = ROOT / ".venv" / "bin" / "mpiexec"

_BENCH = ["bench", "-b", "256m", "-i", "3", "-w", "--json", "-", "--quiet", "-o", "{dir}/t"]
_STEPS = ["--particles", "4Mi", "--steps", "4", "--subfiles", "2", "--compute-time", "0.5s"]
_BIG = ["--particles", "16Mi", "--steps", "1", "--subfiles", "2"]
#: async_overlap.py's own configuration: 256 MiB per rank per step, 4 steps, default plan
_OWN = ["--particles", "8Mi", "--steps", "4"]
_ZERO = ["--async-writes", "--async-zero-copy"]
#: The reads of h5subfile's own reader and their baselines: (name, arguments, what it reads)
_READERS = [
    ("subfiles2", ["-a", "subfile", "--subfiles", "2"], "2 subfiles"),
    ("posix_fpp", ["-a", "posix", "-F"], "POSIX file per process"),
    ("one_file", ["-a", "subfile", "--subfiles", "1"], "one file"),
    ("posix_shared", ["-a", "posix"], "POSIX shared file"),
]
#: name -> (ranks, h5subfile arguments ({dir}: the run's folder), metric, what it is)
COMMANDS: dict[str, tuple[int, list[str], str, str]] = {
    "t16m_subfiles2": (
        2,
        [*_BENCH, "-a", "subfile", "-t", "16m", "-e", "--subfiles", "2"],
        "write_mib",
        "`bench -t 16m -e`, 2 subfiles (write MiB/s)",
    ),
    "t16m_posix_fpp": (
        2,
        [*_BENCH, "-a", "posix", "-t", "16m", "-e", "-F"],
        "write_mib",
        "`bench -t 16m -e`, POSIX file per process (write MiB/s)",
    ),
    "t16m_one_file": (
        2,
        [*_BENCH, "-a", "subfile", "-t", "16m", "-e", "--subfiles", "1"],
        "write_mib",
        "`bench -t 16m -e`, one file (write MiB/s)",
    ),
    "t16m_posix_shared": (
        2,
        [*_BENCH, "-a", "posix", "-t", "16m", "-e"],
        "write_mib",
        "`bench -t 16m -e`, POSIX shared file (write MiB/s)",
    ),
    "t64k_one_file": (
        2,
        [*_BENCH, "-a", "subfile", "-t", "64k", "--subfiles", "1"],
        "write_mib",
        "`bench -t 64k`, one file (write MiB/s)",
    ),
    "t64k_posix_shared": (
        2,
        [*_BENCH, "-a", "posix", "-t", "64k"],
        "write_mib",
        "`bench -t 64k`, POSIX shared file (write MiB/s)",
    ),
    **{
        f"r{size}_{name}": (
            2,
            [*_BENCH, "-r", "-C", "-t", size, *arguments],
            "read_mib",
            f"`bench -t {size} -C`, {label} (read MiB/s)",
        )
        for size in ("1m", "16m")
        for name, arguments, label in _READERS
    },
    "steps_default": (
        2,
        ["vpic", "{dir}/run.h5", *_STEPS, "--json"],
        "observed_step_seconds",
        "VPIC 4 steps, compute 0.5 s, default (s per step)",
    ),
    "steps_async": (
        2,
        ["vpic", "{dir}/run.h5", *_STEPS, "--async-writes", "--json"],
        "observed_step_seconds",
        "the same, `--async-writes` (s per step)",
    ),
    "steps_zero_copy": (
        2,
        ["vpic", "{dir}/run.h5", *_STEPS, "--async-writes", "--async-zero-copy", "--json"],
        "observed_step_seconds",
        "the same, `--async-zero-copy` (s per step)",
    ),
    "big_profiled": (
        2,
        ["vpic", "{dir}/run.h5", *_BIG, "--profile", "{dir}/prof", "--json"],
        "observed_seconds",
        "VPIC 512 MiB per rank, profiled (observed s)",
    ),
    "big_plain": (
        2,
        ["vpic", "{dir}/run.h5", *_BIG, "--json"],
        "observed_seconds",
        "VPIC 512 MiB per rank, not profiled (observed s)",
    ),
    **{
        f"own{c}_{name}": (
            2,
            ["vpic", "{dir}/run.h5", *_OWN, "--compute-time", f"{c}s", *flags, "--json"],
            "observed_step_seconds",
            f"VPIC 256 MiB/rank/step, compute {c} s, {label} (s per step)",
        )
        for c in ("0.5", "0.2")
        for name, flags, label in (
            ("default", [], "default"),
            ("async", ["--async-writes"], "`--async-writes`"),
            ("zero_copy", _ZERO, "`--async-zero-copy`"),
        )
    },
    "vpic_2": (
        2,
        ["vpic", "{dir}/run.h5", "--particles", "4Mi", "--steps", "2", "--json"],
        "observed_seconds",
        "VPIC write, 2 ranks, default plan (observed s)",
    ),
    "vpic_4": (
        4,
        ["vpic", "{dir}/run.h5", "--particles", "4Mi", "--steps", "2", "--json"],
        "observed_seconds",
        "VPIC write, 4 ranks (oversubscribed), default plan (observed s)",
    ),
    "vpic_h5py_2": (
        2,
        [
            *["vpic", "{dir}/run.h5", "--particles", "4Mi", "--steps", "2", "--json"],
            *["--style", "h5py-collective", "--subfiles", "2"],
        ],
        "observed_seconds",
        "VPIC write as an h5py program writes it (undeclared slabs), 2 ranks, 2 subfiles "
        "(observed s)",
    ),
    "rows_h5py_2": (
        2,
        [
            "run",
            "--subfiles",
            "2",
            str(ROOT / "benchmarks" / "round_robin_writer.py"),
            "{dir}/run.h5",
        ],
        "observed_seconds",
        "Round-robin rows as an h5py program writes them (`d[rank::P] = x`), 4 x 32 MiB, "
        "2 ranks, 2 subfiles (observed s)",
    ),
}
#: (label, numerator, denominator, target, "bandwidth" or "time")
RATIOS: list[tuple[str, str, str, str, str]] = [
    (
        "2 subfiles / POSIX file per process, `-t 16m -e`",
        "t16m_subfiles2",
        "t16m_posix_fpp",
        ">= 0.95",
        "bandwidth",
    ),
    (
        "one file / POSIX shared file, `-t 16m -e`",
        "t16m_one_file",
        "t16m_posix_shared",
        ">= 0.95",
        "bandwidth",
    ),
    (
        "64 KiB transfers, one file / POSIX shared file",
        "t64k_one_file",
        "t64k_posix_shared",
        ">= 0.8",
        "bandwidth",
    ),
    *(
        (
            f"reads, {label} / {base_label}, `-t {size} -C`",
            f"r{size}_{name}",
            f"r{size}_{base}",
            ">= 0.95",
            "bandwidth",
        )
        for size in ("1m", "16m")
        for name, label, base, base_label in (
            ("subfiles2", "2 subfiles", "posix_fpp", "POSIX file per process"),
            ("one_file", "one file", "posix_shared", "POSIX shared file"),
        )
    ),
    ("writing behind / default, time per step", "steps_async", "steps_default", "<= 0.90", "time"),
    ("zero copy / default, time per step", "steps_zero_copy", "steps_default", "<= 0.80", "time"),
    ("profiled / not profiled, 512 MiB per rank", "big_profiled", "big_plain", "<= 1.02", "time"),
    *(
        (
            f"{label} / default, 256 MiB/rank/step, compute {c} s",
            f"own{c}_{name}",
            f"own{c}_default",
            target,
            "time",
        )
        for c in ("0.5", "0.2")
        for name, label, target in (
            ("async", "writing behind", "<= 0.90"),
            ("zero_copy", "zero copy", "<= 0.80"),
        )
    ),
]
#: the label's suffix of a bandwidth ratio taken from each run's best iteration (IOR's reading
#: of ``-i N``) instead of the median of its iterations
BEST = ", best iteration of each run"
#: Compared between checkouts directly (NEW / BASE): the VPIC write must not get slower.
DIRECT = ["vpic_2", "vpic_4", "vpic_h5py_2", "rows_h5py_2"]


VERSIONS = (
    "import h5py, mpi4py, numpy; from mpi4py import MPI; "
    "print(f'h5py {h5py.version.version} (HDF5 {h5py.version.hdf5_version}), mpi4py "
    '{mpi4py.__version__}, {" ".join(MPI.Get_library_version().replace("Version:", "").split()[:2])}, numpy '
    "{numpy.__version__}')"
)


def metric(output: str, name: str) -> dict[str, float]:
    """The metric of a command's JSON output: ``value``, the bench's median write bandwidth
    over its iterations (and ``best``, its best iteration's), or a field of the VPIC metrics."""
    data = json.loads(output)
    if name in ("write_mib", "read_mib"):
        access = name.removesuffix("_mib")
        summary = data["summary"][access]
        iterations = [i for i in data["iterations"] if i["access"] == access]
        best = max(iterations, key=lambda i: i["bw_mib_s"])
        return {
            "value": float(summary["median_mib"]),
            "best": float(summary["max_mib"]),
            "phases": {k: statistics.median(i[k] for i in iterations) for k in PHASES},
            "best_phases": {k: best[k] for k in PHASES},
        }
    return {"value": float(data[name])}


#: The phases of a bench iteration (seconds): the file's open (h5subfile: the session's open,
#: creating the subfile), the transfers, the close (h5subfile: the commit of the master).
PHASES = ("open_s", "xfer_s", "close_s")


def phase_rows(data: dict) -> list[list[str]]:
    """Per bandwidth command, the newer checkout's phases in ms: the median over runs of each
    run's median iteration, and of each run's best iteration."""
    new = data["order"][-2]
    rows = []
    for name in data["commands"]:
        found = [
            s
            for s in data["samples"]
            if s["command"] == name and s["checkout"] == new and "phases" in s
        ]
        if not found:
            continue
        cells = [
            f"{1000 * statistics.median(s[kind][k] for s in found):.1f}"
            for k in PHASES
            for kind in ("phases", "best_phases")
        ]
        rows.append([COMMANDS[name][3], *cells])
    return rows


def run(src: str, name: str, folder: Path) -> dict[str, float]:
    ranks, arguments, what, _ = COMMANDS[name]
    run_dir = Path(tempfile.mkdtemp(dir=folder))
    try:
        command = [
            str(MPIEXEC),
            "-n",
            str(ranks),
            "env",
            f"PYTHONPATH={src}",
            str(PYTHON),
            "-m",
            "h5subfile",
            *(a.replace("{dir}", str(run_dir)) for a in arguments),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{name} ({src}) failed: {done.stderr[-2000:]}")
        return metric(done.stdout, what)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        os.sync()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkout",
        action="append",
        required=True,
        metavar="NAME=SRC",
        help="a checkout's name and its src folder (the last also runs twice)",
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None, help="these commands only")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--title", default=TITLE, help="the section's title")
    args = parser.parse_args()
    checkouts = dict(c.split("=", 1) for c in args.checkout)
    names = list(checkouts)
    last = names[-1]
    order = [*names, last + "'"]
    sources = {**checkouts, last + "'": checkouts[last]}
    commits = {
        name: subprocess.run(
            ["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        for name, src in checkouts.items()
    }
    commands = args.only or list(COMMANDS)
    facts = run_facts(os.getloadavg(), time.time())
    facts["versions"] = subprocess.run(
        [str(PYTHON), "-c", VERSIONS], capture_output=True, text=True, check=True
    ).stdout.strip()
    samples: list[dict[str, Any]] = []
    loads: list[float] = []
    folder = Path(tempfile.mkdtemp(prefix="write-patterns-"))
    started = time.time()
    try:
        for rep in range(args.reps):
            loads.append(os.getloadavg()[0])
            rotated = order[rep % len(order) :] + order[: rep % len(order)]
            for name in commands:
                for checkout in rotated:
                    measured = run(sources[checkout], name, folder)
                    samples.append({"rep": rep, "command": name, "checkout": checkout, **measured})
            done = time.time() - started
            print(
                f"repetition {rep + 1}/{args.reps} done ({done:.0f} s); load before it "
                f"{loads[-1]:.2f}",
                file=sys.stderr,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    data = {
        "argv": sys.argv[1:],
        "title": args.title,
        "facts": facts,
        "reps": args.reps,
        "checkouts": checkouts,
        "commits": commits,
        "order": order,
        "commands": commands,
        "loads": loads,
        "samples": samples,
    }
    print(render(data))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


# The section -----------------------------------------------------------------------------------
def values(data: dict, command: str, checkout: str, field: str = "value") -> dict[int, float]:
    """A command's ``field`` for one checkout, by repetition (``best``: the best iteration's
    bandwidth, kept since the runs of #51)."""
    return {
        s["rep"]: s[field]
        for s in data["samples"]
        if s["command"] == command and s["checkout"] == checkout and field in s
    }


def cell(xs: list[float], digits: int = 2) -> str:
    if not xs:
        return "-"
    return f"{statistics.median(xs):.{digits}f} ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


def _size(value: float) -> int:
    return 3 if value < 10 else 0


def ratios(data: dict, top: str, bottom: str, checkout: str, field: str = "value") -> list[float]:
    """``top`` / ``bottom`` of one checkout, repetition by repetition."""
    a, b = values(data, top, checkout, field), values(data, bottom, checkout, field)
    return [a[r] / b[r] for r in sorted(a) if r in b and b[r]]


def between(data: dict, command: str, top: str, bottom: str) -> list[float]:
    """Checkout ``top`` / checkout ``bottom`` for one command, repetition by repetition."""
    a, b = values(data, command, top), values(data, command, bottom)
    return [a[r] / b[r] for r in sorted(a) if r in b and b[r]]


def steps_and_compute(command: str) -> tuple[int, float] | None:
    """A VPIC command's steps and compute seconds after each step but the last (None: a
    command without emulated compute)."""
    arguments = COMMANDS[command][1]
    if "--compute-time" not in arguments:
        return None
    steps = int(arguments[arguments.index("--steps") + 1])
    return steps, float(arguments[arguments.index("--compute-time") + 1].rstrip("s"))


def best_overlap(data: dict, default: str, checkout: str) -> list[float]:
    """The lowest time per step writing behind can reach against ``default`` (its time per step
    with compute), repetition by repetition: every write hidden behind the compute but the
    last step's, which nothing follows (h5bench puts no compute after the last step). With
    ``T`` the default's whole time and ``C`` its compute, the bound is ``(C + (T - C) / steps)
    / T``: the last step's write taken as an equal share of the default's I/O time (its open
    and close counted in that share only, so the true bound is, if anything, higher)."""
    shape = steps_and_compute(default)
    if shape is None:
        return []
    steps, compute = shape
    computed = (steps - 1) * compute
    bounds = []
    for step_seconds in values(data, default, checkout).values():
        whole = step_seconds * steps
        bounds.append((computed + (whole - computed) / steps) / whole)
    return bounds


def ratio_rows(data: dict) -> list[list[str]]:
    order = data["order"]
    base, new, null = order[0], order[-2], order[-1]
    rows = []
    for label, top, bottom, target, _ in RATIOS:
        if top not in data["commands"] or bottom not in data["commands"]:
            continue
        for field, suffix in (("value", ""), ("best", BEST)):
            by = {c: ratios(data, top, bottom, c, field) for c in order}
            if not by[new]:
                continue
            change = [n / b for n, b in zip(by[new], by[base])]
            noise = [n2 / n for n2, n in zip(by[null], by[new])]
            best = cell(best_overlap(data, bottom, new))
            rows.append(
                [
                    label + suffix,
                    target,
                    cell(by[base]),
                    cell(by[new]),
                    cell(change),
                    cell(noise),
                    best,
                ]
            )
    return rows


def command_rows(data: dict) -> list[list[str]]:
    order = data["order"]
    base, new, null = order[0], order[-2], order[-1]
    rows = []
    for name in data["commands"]:
        what = COMMANDS[name][3]
        digits = _size(statistics.median(values(data, name, base).values()))
        change = between(data, name, new, base)
        rows.append(
            [
                what,
                cell(list(values(data, name, base).values()), digits),
                cell(list(values(data, name, new).values()), digits),
                cell(change),
                f"{sum(c < 1 for c in change)} of {len(change)}",
                cell(between(data, name, null, new)),
            ]
        )
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|---" * len(header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def render(data: dict) -> str:
    order = data["order"]
    base, new = order[0], order[-2]
    commits = data["commits"]
    facts = data["facts"]
    lines = [
        f"## {data.get('title', TITLE)}",
        "",
        f"Each write pattern of the issue that asked for it, measured for two checkouts in one "
        f"series: {base} ({commits.get(base, '?')}) and {new} ({commits.get(new, '?')}), "
        f"{new} twice ({new}' / {new} is the null comparison), the checkouts' order rotating "
        f"each repetition, every run a fresh `mpiexec` into a fresh folder (deleted, then "
        f"`sync`, untimed), {data['reps']} repetitions. The metric is each command's own "
        "(its JSON). Load average before each repetition: "
        + ", ".join(f"{x:.2f}" for x in data["loads"])
        + ". Measured with:",
        "",
        "```sh",
        "git worktree add /tmp/base <commit before>",
        *_command(data),
        "```",
        "",
        f"- machine: {facts['machine']}, {facts['cpus']} cores; started "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(facts['started']))}",
        f"- versions: {facts['versions']}",
        "- 2 ranks on 2 cores, except the 4-rank VPIC write (oversubscribed); writes land in "
        "the page cache",
        "",
        "Ratios, per repetition, of two commands of the same checkout (bandwidths: above 1 "
        "faster than the baseline; times: below 1 faster). Cells: median (min-max).",
        "",
        *_table(
            [
                "measure",
                "target",
                base,
                new,
                f"{new} / {base}",
                f"null {new}' / {new}",
                f"best possible ({new})",
            ],
            ratio_rows(data),
        ),
        "",
        *(
            [
                "*Best iteration of each run*: the same bandwidths taken from each run's best "
                "of its iterations (IOR's maximum) instead of their median.",
                "",
            ]
            if any(row[0].endswith(BEST) for row in ratio_rows(data))
            else []
        ),
        "*Best possible*, for writing behind: the time per step it would take if every write "
        "but the last step's were hidden behind the compute (nothing follows the last step), "
        "from the default's own time in the same repetition, `(C + (T - C) / steps) / T` with "
        "`T` the default's whole time and `C` its compute. A target below it cannot be met in "
        "that configuration.",
        "",
        "Each command (times: below 1 faster; bandwidths: above 1 faster).",
        "",
        *_table(
            [
                "command",
                base,
                new,
                f"{new} / {base}",
                f"{new} / {base} below 1 in",
                f"null {new}' / {new}",
            ],
            command_rows(data),
        ),
    ]
    phases = phase_rows(data)
    if phases:
        lines += [
            "",
            f"Where a bench iteration's time goes ({new}, ms): the median over the runs of each "
            "run's median iteration, and of its best iteration (*best*). An iteration's "
            "bandwidth is its bytes over open + transfers + close.",
            "",
            *_table(
                [
                    "command",
                    "open",
                    "open, best",
                    "transfers",
                    "transfers, best",
                    "close",
                    "close, best",
                ],
                phases,
            ),  # fmt: skip
        ]
    if data.get("notes"):  # what the tables say, and why (written once the run was read)
        lines += ["", *(f"- {note}" for note in data["notes"])]
    return "\n".join(lines)


def _command(data: dict) -> list[str]:
    """The command that made ``data`` (its arguments as run, when the JSON keeps them)."""
    argv = data.get(
        "argv",
        [
            "--checkout",
            "BASE=/tmp/base/src",
            "--checkout",
            "NEW=src",
            "--reps",
            "5",
            "--json",
            "docs/write-patterns.json",
        ],
    )
    quoted = [f'"{a}"' if " " in a else a for a in argv]
    return [".venv/bin/python benchmarks/write_patterns.py " + " ".join(quoted)]


def _lower(title: str) -> str:
    """``title`` inside a sentence: its first letter lowered, unless it starts an acronym."""
    return title if title[:2].isupper() else title[0].lower() + title[1:]


def summary_rows(data: dict) -> list[tuple[str, str, str]]:
    order = data["order"]
    base, new, null = order[0], order[-2], order[-1]
    title = data.get("title", TITLE)
    answer = "; ".join(
        f"{row[0]}: {base} **{row[2].split()[0]}**, {new} **{row[3].split()[0]}** "
        f"(target {row[1]}; null {row[5].split()[0]}"
        + ("" if row[6] == "-" else f"; best possible {row[6].split()[0]}")
        + ")"
        for row in ratio_rows(data)
    )
    measured = set(data["commands"])
    kinds = {kind for _, top, bottom, _, kind in RATIOS if {top, bottom} <= measured}
    legend = (
        "bandwidth ratios: above 1 faster; time ratios: below 1 faster"
        if "bandwidth" in kinds
        else "time ratios: below 1 faster"
    )
    question = (
        f"Write patterns at 2 ranks against their baselines ({legend}), before and after"
        if title == TITLE
        else f"{title} ({legend})"
    )
    rows = [(question, answer, title)] if answer else []
    direct = "; ".join(
        f"{COMMANDS[name][3]}: **{cell(between(data, name, new, base))}** "
        f"(null {cell(between(data, name, null, new))})"
        for name in DIRECT
        if name in data["commands"]
    )
    if direct:
        rows.append(
            (
                f"VPIC write, {'after the write-pattern work' if title == TITLE else _lower(title)}: "
                f"{new} / {base} (observed s; above 1 slower)",
                direct,
                title,
            )
        )
    return rows


# The latest value of each measure, over every series -------------------------------------------
LATEST_TITLE = "Write patterns against their baselines"


def latest(series: list[dict]) -> list[dict]:
    """For each ratio of :data:`RATIOS` (and each best-iteration form) and each command of
    :data:`DIRECT`, the newest series that measured it: ``measure``, ``target``, ``value``
    (NEW's ratio, or NEW / BASE for a direct command), ``null``, and ``series`` (the record)."""
    newest_first = sorted(series, key=lambda d: d["facts"]["started"], reverse=True)
    found: dict[str, dict] = {}
    for data in newest_first:
        for row in ratio_rows(data):
            found.setdefault(
                row[0],
                {
                    "measure": row[0],
                    "target": row[1],
                    "value": row[3],
                    "null": row[5],
                    "series": data,
                },
            )
        order = data["order"]
        base, new, null = order[0], order[-2], order[-1]
        for name in DIRECT:
            if name in data["commands"] and data["commits"].get(base):
                found.setdefault(
                    COMMANDS[name][3],
                    {
                        "measure": f"{COMMANDS[name][3]}: {new} / {base}",
                        "target": "<= 1 (beyond the null)",
                        "value": cell(between(data, name, new, base)),
                        "null": cell(between(data, name, null, new)),
                        "series": data,
                    },
                )
    measures = [label for label, *_ in RATIOS] + [COMMANDS[n][3] for n in DIRECT]
    order = {m: i for i, m in enumerate(measures)}
    return [found[key] for key in sorted(found, key=lambda k: (order[k.removesuffix(BEST)], k))]


def render_latest(series: list[dict], where: Callable[[dict], str]) -> str:
    """The reference section: each measure's latest ratio, and the series it comes from
    (``where(record)``: a Markdown link to that series' section)."""
    rows = [
        [
            r["measure"],
            r["target"],
            f"**{r['value']}**",
            r["null"],
            f"{where(r['series'])}, {r['series']['commits'].get(r['series']['order'][-2], '?')}, "
            + time.strftime("%Y-%m-%d", time.gmtime(r["series"]["facts"]["started"])),
        ]
        for r in latest(series)
    ]
    lines = [
        f"## {LATEST_TITLE}",
        "",
        "Generated by `benchmarks/write_patterns.py` from the latest series of each measure "
        "(docs/write-patterns*.json): for each ratio, the newest series that measured it, its "
        "newer checkout's value, median (min-max) over the repetitions, ratios taken per "
        "repetition between two commands of the same checkout (bandwidths: above 1 faster "
        "than the baseline; times: below 1 faster), and the null comparison of the same series "
        "(the same checkout run twice). *Best iteration of each run*: IOR's way of reading "
        "`-i 3`, the best of a run's three iterations, where the other rows take their "
        "median. The VPIC rows below the ratios compare the two checkouts of their series "
        "directly (observed seconds; above 1 slower). 2 ranks on 2 cores but the 4-rank "
        "write (oversubscribed); writes land in the page cache. Every series, with its "
        "commands and each command's own times, is in "
        "[BENCHMARKS-HISTORY.md](BENCHMARKS-HISTORY.md). Measure again (BASE: a worktree of "
        "the commit before a change):",
        "",
        "```sh",
        "git worktree add /tmp/base <commit before>",
        ".venv/bin/python benchmarks/write_patterns.py --checkout BASE=/tmp/base/src "
        "--checkout NEW=src --reps 5 --json docs/write-patterns-NAME.json",
        "```",
        "",
        *_table(["measure", "target", "latest", "null", "series"], rows),
        "",
        "A row whose null comparison is far from 1 cannot tell its value from its target: "
        "its series' notes say what measures it better (writing behind: *Writing behind, "
        "chosen call by call*; profiling: *Cost of profiling*, both below).",
    ]
    return "\n".join(lines)


def latest_summary_rows(series: list[dict]) -> list[tuple[str, str, str]]:
    """The summary's rows of the reference section: the per-call and per-file ratios."""
    keep = ("64 KiB", "`-t 16m -e`", "profiled", "VPIC write, 2 ranks")
    answer = "; ".join(
        f"{r['measure']}: **{r['value'].split()[0]}** (target {r['target']}; null "
        f"{r['null'].split()[0]})"
        for r in latest(series)
        if any(k in r["measure"] for k in keep)
    )
    return [
        (
            "Write patterns at 2 ranks, the latest series of each (bandwidth ratios: above 1 "
            "faster; time ratios: below 1 faster)",
            answer,
            LATEST_TITLE,
        )
    ]


if __name__ == "__main__":
    main()
