"""BD-CATS-IO: the paper's read kernel, with h5bench's PARTIAL and STRIDED patterns.

Every dataset of every ``Timestep_<s>`` group is split over the readers as in the paper: rank p
of P reads ``[p*N/P, (p+1)*N/P)``, the last rank also the remainder. Patterns:

- ``full``: the whole share;
- ``partial``: the first ``count`` particles of the share (by default half a share, as
  h5bench's partial read reads a configured part: :func:`resolve_count`);
- ``strided``: inside the share, ``blocks`` blocks of ``block`` particles every ``stride``
  particles, from ``start`` (h5bench's STRIDED);
- ``random``: ``fraction`` (10%) of the share at random positions (the paper's random read).

Works on any file with that layout, including files written by h5bench (plain HDF5).
"""

from __future__ import annotations

import dataclasses
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from ..errors import CorruptFileError, H5SubfileError
from ..files import Dataset, File, Group
from ..following import follow
from ..layout.selection import partition
from ..layout.vpic import FIELDS
from ..mpi.collective import agree, barrier
from .metrics import Metrics, reduce_metrics
from .vpic import KERNEL_ATTR, KERNEL_NAME, particle_values

PATTERNS = ("full", "partial", "strided", "random")
_STEP = re.compile(r"^Timestep_(\d+)$")


class VerificationError(H5SubfileError, ValueError):
    """Data read back differs from what VPIC-IO wrote."""


@dataclass(frozen=True)
class Pattern:
    kind: str = "full"
    count: int | None = None  # partial (None: half a share, resolve_count)
    start: int = 0  # strided
    stride: int = 1
    block: int = 1
    blocks: int = 0  # 0: as many as fit
    fraction: float = 0.1  # random
    seed: int = 1


def select(pattern: Pattern, n: int, size: int, rank: int) -> slice | np.ndarray:
    """The particles (global indices) rank ``rank`` of ``size`` reads from a dataset of ``n``."""
    lo, hi = partition(n, size, rank)
    share = hi - lo
    if pattern.kind == "full":
        return slice(lo, hi)
    if pattern.kind == "partial":
        count = resolve_count(pattern, [n], size).count or 0  # the run's, once resolved
        return slice(lo, lo + min(count, share))
    if pattern.kind == "strided":
        firsts = np.arange(lo + pattern.start, hi, pattern.stride, dtype=np.int64)
        if pattern.blocks:
            firsts = firsts[: pattern.blocks]
        if firsts.size == 0:
            return np.zeros(0, dtype=np.int64)
        index = (firsts[:, None] + np.arange(pattern.block, dtype=np.int64)[None, :]).ravel()
        return index[index < hi]
    if pattern.kind == "random":
        rng = np.random.default_rng(pattern.seed * 1_000_003 + rank)
        k = min(share, max(1, int(round(pattern.fraction * share)))) if share else 0
        return np.sort(rng.choice(share, size=k, replace=False, shuffle=False)) + lo
    raise ValueError(f"unknown pattern {pattern.kind!r}; choose from {', '.join(PATTERNS)}")


def resolve_count(pattern: Pattern, lengths: list[int], size: int) -> Pattern:
    """``pattern`` with the count a partial read uses when none was given: half a rank's
    share (rounded up) of the shortest of the datasets of ``lengths`` particles, so that it
    fits every one of them; any other pattern as it is (pure: the same on every rank)."""
    if pattern.kind != "partial" or pattern.count is not None:
        return pattern
    share = min(lengths, default=0) // size  # the smallest share (the last rank's is larger)
    return dataclasses.replace(pattern, count=(share + 1) // 2)


def check_pattern(pattern: Pattern, name: str, n: int, size: int) -> str | None:
    """Why ``pattern`` (its count resolved, :func:`resolve_count`) cannot be read from
    dataset ``name`` of ``n`` particles by ``size`` ranks, or None (the same answer on every
    rank)."""
    share = n // size  # the smallest share (the last rank also takes the remainder)
    if pattern.kind == "partial" and pattern.count is not None and pattern.count > share:
        return (
            f"--count {pattern.count} is more than a rank's share of {name} ({share} of its {n} "
            f"particles with {size} rank(s)): give --count {share} or less, or --pattern full"
        )
    return None


def _indices(selection: slice | np.ndarray) -> np.ndarray:
    if isinstance(selection, slice):
        return np.arange(selection.start, selection.stop, dtype=np.uint64)
    return selection.astype(np.uint64)


def _step_datasets(f: File, name: str) -> list[tuple[str, Dataset]]:
    """The datasets of step group ``name`` to read: the VPIC-IO fields it has, else every member."""
    group = f[name]
    if not isinstance(group, Group):
        raise CorruptFileError(
            f"{f.filename}: /{name} is a dataset, not a group: not a VPIC-IO file"
        )
    fields = [n for n, _ in FIELDS if n in group] or sorted(group.keys())
    datasets = []
    for field in fields:
        dataset = group[field]
        if not isinstance(dataset, Dataset):
            raise CorruptFileError(
                f"{f.filename}: /{name}/{field} is a group, not a dataset: not a VPIC-IO file"
            )
        datasets.append((field, dataset))
    return datasets


Reads = list[tuple[int, str, list[tuple[str, Dataset]]]]


def _plan_reads(
    f: File, path: str, pattern: Pattern, verify: bool, size: int, only: str | None = None
) -> tuple[Reads, Pattern, H5SubfileError | None]:
    """The steps to read (number, group name, datasets) and ``pattern`` with its count
    resolved over their datasets (:func:`resolve_count`), or why the file cannot be read with
    ``pattern`` by ``size`` ranks (the same on every rank: the catalogue is). ``only``: the
    one step to read (a followed step), else every ``Timestep_<n>`` group."""
    names = f.keys() if only is None else [only]
    steps = sorted((int(m.group(1)), name) for name in names if (m := _STEP.match(name)))
    try:
        if not steps:
            raise CorruptFileError(f"{path} has no Timestep_<n> groups: not a VPIC-IO file")
        if verify and f.attrs.get(KERNEL_ATTR) != KERNEL_NAME:
            raise CorruptFileError(
                f"--verify needs a file written by 'h5subfile vpic'; {path} was not"
            )
        reads = [(step, name, _step_datasets(f, name)) for step, name in steps]
    except CorruptFileError as exc:
        return [], pattern, exc
    every = [dataset for _, _, datasets in reads for _, dataset in datasets]
    pattern = resolve_count(pattern, [dataset.shape[0] for dataset in every], size)
    for dataset in every:
        problem = check_pattern(pattern, dataset.name, dataset.shape[0], size)
        if problem:
            return [], pattern, H5SubfileError(problem)
    return reads, pattern, None


def run_bdcats(
    path: str,
    pattern: Pattern,
    comm: MPI.Comm | None = None,
    verify: bool = False,
    progress: Callable[[int, int], None] | None = None,
    profile: str | None = None,
    **plan: Any,
) -> Metrics:
    """Collective: read ``path`` with the BD-CATS-IO pattern; optionally verify VPIC-IO values.

    ``plan``: the read-side plan fields (``aggregators``, ``buffer_size``, ``transfer_size``);
    with aggregators, each rank's share is read collectively through them (two-phase I/O).
    ``progress(done, total)``, if given, is called with the datasets read so far. ``profile``:
    the folder the read session's profile goes to (None: not profiled).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    reading = _Reading(comm, pattern, verify)
    barrier(comm)
    started = time.perf_counter()
    with warnings.catch_warnings():
        # The file's problems: a dataset read below raises its own, once agreed; others do
        # not concern this kernel.
        warnings.simplefilter("ignore", RuntimeWarning)
        f = File(path, "r", comm=comm, profile=profile, **plan)
    with f:
        reads, reading.pattern, error = _plan_reads(f, path, pattern, verify, comm.size)
        agree(comm, error)
        total = sum(len(datasets) for _, _, datasets in reads)
        if progress:
            progress(0, total)
        for step, name, datasets in reads:
            reading.step(step, name, datasets, lambda done: progress and progress(done, total))
        raw = f.stats.data_read_seconds
    return reading.metrics(raw, time.perf_counter() - started)


def follow_bdcats(
    path: str,
    pattern: Pattern,
    comm: MPI.Comm | None = None,
    verify: bool = False,
    timeout: float | None = 60.0,
    progress: Callable[[int, int], None] | None = None,
    **plan: Any,
) -> Metrics:
    """Collective: read each step of ``path`` as soon as its writer commits it
    (:func:`h5subfile.follow`), with the BD-CATS-IO pattern, until the writer closes the file;
    ``timeout``: seconds to wait for a step. Observed time includes the waits for the writer.
    ``progress(done, 0)`` is called with the datasets read so far (their total is unknown)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    reading = _Reading(comm, pattern, verify)
    barrier(comm)
    started = time.perf_counter()
    raw = 0.0
    for group in follow(path, comm, timeout=timeout, **plan):
        name = group.name.strip("/")
        if _STEP.match(name) is None:
            continue  # not a VPIC-IO step
        before = group.file.stats.data_read_seconds
        # The first step read fixes a partial read's count: the same for every step
        planned = _plan_reads(group.file, path, reading.pattern, verify, comm.size, only=name)
        reads, reading.pattern, error = planned
        agree(comm, error)
        for step, _, datasets in reads:
            reading.step(step, name, datasets, lambda done: progress and progress(done, 0))
        raw += group.file.stats.data_read_seconds - before
    return reading.metrics(raw, time.perf_counter() - started)


class _Reading:
    """What a BD-CATS-IO read counts: bytes, excluded time (selections, checks), mismatches."""

    def __init__(self, comm: MPI.Comm, pattern: Pattern, verify: bool):
        self.comm, self.pattern, self.verify = comm, pattern, verify
        self.excluded = 0.0
        self.nbytes = 0
        self.done = 0
        self.bad: list[str] = []

    def step(
        self,
        step: int,
        name: str,
        datasets: list[tuple[str, Dataset]],
        progress: Callable[[int], Any],
    ) -> None:
        """Collective: read (and check) one step's datasets; read errors agreed."""
        comm = self.comm
        error = None
        for field, dataset in datasets:
            t = time.perf_counter()
            selection = select(self.pattern, dataset.shape[0], comm.size, comm.rank)
            self.excluded += time.perf_counter() - t
            try:
                # Collective: rank 0 sends each rank only the extents its selection touches
                # when the file has too many to broadcast, and with aggregators two-phase.
                data = dataset.read_collective(selection)
            except H5SubfileError as exc:
                error = exc  # a damaged dataset fails the same way on every rank
                break
            self.nbytes += data.nbytes
            self.done += 1
            progress(self.done)
            if self.verify:
                t = time.perf_counter()
                expected = particle_values(field, step, _indices(selection))
                if not np.array_equal(data.view(np.uint8), expected.view(np.uint8)):
                    wrong = int(np.count_nonzero(data != expected))
                    self.bad.append(f"{name}/{field}: {wrong} of {data.size} values differ")
                self.excluded += time.perf_counter() - t
        agree(comm, error)  # read errors of this step: the same on every rank

    def metrics(self, raw: float, elapsed: float) -> Metrics:
        """Collective: the job's metrics (with a partial read's count); VerificationError
        when values differed."""
        error = VerificationError("; ".join(self.bad[:5])) if self.bad else None
        agree(self.comm, error)
        metrics = reduce_metrics(self.comm, "read", self.nbytes, raw, elapsed - self.excluded)
        if self.pattern.kind == "partial":
            metrics.count = self.pattern.count
        return metrics
