"""Tuning on the job's own ranks and folder (``h5subfile tune``, docs/TUNING.md): every plan the
search asks for is written with the benchmark driver (``h5subfile bench -a subfile``), the
plans of a round interleaved, and timed as IOR times a write phase (first open to last close).

Collective: every rank runs the same search on the same (agreed) times, so every rank returns
the same result; rank 0 saves the tuning profile, in a folder it checked it can write before
the search (so that a long search does not end in an error), and every rank raises its error.

A trial writes a :class:`Pattern` (VPIC-IO's step by default); :func:`save_result` has rank
0 save the profile that :func:`profile_from_result` makes of the run.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpi4py import MPI

from ..bench.driver import run_interleaved
from ..bench.options import BenchOptions
from ..errors import PlanError, as_error
from ..io.filesystem import FileSystem, probe, starting_points
from ..io.tuning_profiles import Profile, require_writable, save_profile
from ..mpi.collective import root_only
from ..mpi.nodes import locate_nodes
from ..progress import Progress
from .search import Budget, TuningResult, coordinate_descent, exhaustive_search
from .space import Point, label, problem, search_space

MIB = 1 << 20


@dataclass(frozen=True)
class Pattern:
    """What each trial writes: ``datasets`` 1-D datasets of ``block`` bytes per rank, in
    ``transfer``-byte writes (IOR's ``-s -b -t``). The default is VPIC-IO's step: 8 variables
    of 1 Mi particles (4 MiB) per rank, each written whole."""

    datasets: int = 8
    block: int = 4 * MIB
    transfer: int = 4 * MIB
    fsync: bool = False

    def describe(self, ranks: int) -> str:
        total = self.datasets * self.block * ranks
        return (
            f"{self.datasets} datasets x {self.block // 1024} KiB per rank in "
            f"{self.transfer // 1024} KiB writes ({total / MIB:.0f} MiB per trial at {ranks} "
            f"ranks){', fsync' if self.fsync else ''}"
        )


def pattern_like(profile: dict[str, Any], fsync: bool = False) -> Pattern:
    """A pattern writing as many bytes per rank as the job a write profile describes
    (``File(..., profile=DIR)``, ``h5subfile profile``): the median over its ranks of the
    bytes written, in VPIC-IO's 8 datasets, each written whole. The profile says how much
    each rank wrote, not in how many datasets: the layout stays VPIC-IO's."""
    if profile.get("format") != "h5subfile-profile" or not profile.get("ranks"):
        raise PlanError("not an h5subfile write profile (NAME.write.json from --profile)")
    written = sorted(int(rank["bytes_written"]) for rank in profile["ranks"])
    per_rank = written[len(written) // 2]
    block = max(8, per_rank // 8 // 8 * 8)
    return Pattern(8, block, block, fsync)


def bench_options(point: Point, pattern: Pattern, folder: str, repetitions: int) -> BenchOptions:
    """The benchmark run of one plan: ``repetitions`` timed writes of ``pattern`` in ``folder``."""
    return BenchOptions(
        api="subfile",
        block=pattern.block,
        transfer=pattern.transfer,
        segments=pattern.datasets,
        iterations=repetitions,
        write=True,
        read=False,
        fsync=pattern.fsync,
        test_file=os.path.join(folder, "h5subfile-tune"),
        subfiles=point.get("subfiles"),
        ranks_per_subfile=point.get("ranks_per_subfile"),
        alignment=point.get("alignment") or 0,
        plan={k: point.get(k) for k in ("aggregators", "buffer_size", "transfer_size")},
    )


class BenchMeasure:
    """The search's ``measure``: runs rounds with the benchmark driver and says where it is."""

    def __init__(
        self, comm: MPI.Intracomm, folder: str, pattern: Pattern, progress: Progress
    ) -> None:
        self.comm, self.folder, self.pattern, self.progress = comm, folder, pattern, progress
        self.rounds = 0

    def __call__(self, points: list[Point], repetitions: int) -> list[list[float]]:
        self.rounds += 1
        runs = [bench_options(p, self.pattern, self.folder, repetitions) for p in points]
        self.progress.phase(f"tune: round {self.rounds}: {len(points)} plans x {repetitions}")
        results = run_interleaved(runs, self.comm, Progress(False))
        times = [[r.total_s for r in found if r.access == "write"] for found in results]
        best = min(range(len(points)), key=lambda i: sorted(times[i])[len(times[i]) // 2])
        self.progress.finish(
            f"tune: round {self.rounds}: {len(points)} plans x {repetitions}, fastest "
            f"{label(points[best])}"
        )
        return times


def tune(
    comm: MPI.Intracomm,
    folder: str,
    pattern: Pattern | None = None,
    repetitions: int = 5,
    seconds: float | None = None,
    exhaustive: bool = False,
    progress: Progress | None = None,
    save_to: Path | None = None,
) -> tuple[TuningResult, FileSystem]:
    """Collective: search the plan space for ``comm``'s rank count on ``folder``'s file system
    (coordinate descent from the file system's starting point, or every point with
    ``exhaustive``), within ``seconds`` when given. ``save_to``: the tuning folder the result
    will be saved in (:func:`save_result`), checked writable first; every rank raises the
    same error if it is not (or if ``folder`` cannot be made)."""
    pattern = pattern or Pattern()
    progress = progress or Progress(False)
    ranks = comm.size
    fs = root_only(comm, lambda: _made_and_probed(folder, save_to))
    space = search_space(ranks)
    measure = BenchMeasure(comm, folder, pattern, progress)
    budget = Budget(seconds=seconds)
    if exhaustive:
        return exhaustive_search(space, measure, ranks, repetitions, budget), fs
    start = next(
        (p for p in starting_points(fs, ranks, pattern.block) if not problem(p, ranks)), {}
    )
    result = coordinate_descent(space, measure, ranks, repetitions, budget, start=start)
    return result, fs


def _made_and_probed(folder: str, save_to: Path | None) -> FileSystem:
    """Rank 0: the folder (made if missing) and its file system, once the tuning folder
    ``save_to`` (when given) is known to be writable."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise as_error(exc) from None
    if save_to is not None:
        require_writable(save_to)
    return probe(folder)


def profile_from_result(
    result: TuningResult, filesystem: str, mount: str, ranks: int, nodes: int, date: str
) -> Profile:
    """The profile of a tuning run (``date``: when it ran, ISO 8601)."""
    summary = {
        "margin": result.margin,
        "spread": list(result.spread),
        "noise": result.noise,
        "trials": result.trials,
        "date": date,
        "reason": result.reason,
    }
    return Profile(filesystem, mount, ranks, nodes, dict(result.recommendation or {}), summary)


def save_result(
    comm: MPI.Intracomm, result: TuningResult, fs: FileSystem, directory: Path | None = None
) -> str:
    """Collective: rank 0 saves the run's tuning profile; every rank returns its path, or
    raises rank 0's error."""
    nodes = locate_nodes(comm).count

    def save() -> str:
        date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        profile = profile_from_result(result, fs.name, fs.mount, comm.size, nodes, date)
        return str(save_profile(profile, directory))

    return root_only(comm, save)
