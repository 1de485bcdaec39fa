"""Figures of docs/BENCHMARKS.md: median bars with min-max whiskers over repetitions.

Shared by the section generators (``paper_experiment``, ``storage_experiment``, ``report``, and
the run facts of ``checksum_cost``, ``profile_cost``, ``open_scaling``); every
figure is drawn from the saved JSON only, never from a new measurement. matplotlib is imported
when a figure is drawn, so that rendering the Markdown needs none.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: What `make` installs into .venv (the h5py and mpich wheels from PyPI) when this document was
#: written; a section measured with another HDF5 or MPI says so in its own text.
MAKE_HDF5 = "2.0.0"
MAKE_MPI = "MPICH 5.0.2"


def rebuild_report() -> int:
    """Rebuild docs/BENCHMARKS.md whole (every section and its summary) and every figure from
    the saved results, as ``python benchmarks/report.py`` does (run as its own process: the
    report imports the experiments, never the reverse)."""
    import sys

    report = Path(__file__).resolve().parent / "report.py"
    return subprocess.run([sys.executable, str(report)], check=False).returncode


def run_facts(load_before: Sequence[float], started: float) -> dict[str, Any]:
    """What every saved run records about where and when it ran: cores, platform, the load
    average before and now, the commit, the start time (epoch seconds)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "load_before": list(load_before),
        "load_after": list(os.getloadavg()),
        "commit": commit.stdout.strip(),
        "started": started,
    }


def mpi_name(mpi: str) -> str:
    """'MPICH Version:\t4.0.2' (as mpi4py reports it) -> 'MPICH 4.0.2'."""
    return " ".join(mpi.replace("Version:", "").split())


def same_as_make(hdf5: str, mpi: str) -> bool:
    """Whether a run's HDF5 and MPI versions are those `make` installs."""
    return hdf5 == MAKE_HDF5 and mpi_name(mpi) == MAKE_MPI


def environment_warning(hdf5: str, mpi: str, how: str) -> list[str]:
    """A prominent note when a section ran with another HDF5 or MPI than `make` installs."""
    if same_as_make(hdf5, mpi):
        return [f"Measured with the environment `make` installs (HDF5 {hdf5}, {MAKE_MPI})."]
    used = mpi_name(mpi)
    return [
        f"> **Different software from `make`.** This section ran with HDF5 {hdf5} and {used} "
        f"(installed by {how}), not with HDF5 {MAKE_HDF5} and {MAKE_MPI} that `make` installs "
        "into `.venv`. Compare its numbers with each other, not with sections measured in "
        "`.venv`."
    ]


def caption(number: str, text: str) -> str:
    """The caption line under a figure (Markdown, italic)."""
    return f"*Figure {number}. {text}*"


def bars(
    path: Path,
    title: str,
    labels: Sequence[str],
    series: dict[str, Sequence[Sequence[float]]],
    xlabel: str,
    log: bool = True,
) -> None:
    """Horizontal bars, one group per label and one bar per series: the median of the samples,
    whiskers from their minimum to their maximum. ``series[name][i]`` are label i's samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = len(series)
    height = 0.8 / max(count, 1)
    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.28 * len(labels) * max(count, 1)))
    for number, (name, samples) in enumerate(series.items()):
        where = [i + (number - (count - 1) / 2) * height for i in range(len(labels))]
        present = [(y, s) for y, s in zip(where, samples) if len(s)]
        mid = [statistics.median(s) for _, s in present]
        low = [m - min(s) for m, (_, s) in zip(mid, present)]
        high = [max(s) - m for m, (_, s) in zip(mid, present)]
        ax.barh(
            [y for y, _ in present],
            mid,
            height=height * 0.9,
            xerr=[low, high],
            capsize=2,
            color=f"C{number}",
            error_kw={"elinewidth": 0.8, "ecolor": "black"},
            label=name,
        )
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    if log:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    if count > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
