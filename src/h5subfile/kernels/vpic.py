"""VPIC-IO: the paper's write kernel, with exactly h5bench's file layout.

Each time step is a group ``Timestep_<s>`` holding 1-D datasets ``x y z px py pz`` (float32),
``id_1`` (int32) and ``id_2`` (float32), in that order; rank r's particles start at the exclusive
prefix sum of the ranks' counts. Values are a deterministic function of (step, global particle
index), so that any reader, with any rank count, can verify them.

The same kernel writes through h5subfile (:func:`run_vpic`) or, as the baseline it is measured
against, through parallel HDF5 with h5py's ``mpio`` driver into one shared file
(:func:`run_vpic_phdf5`: each rank writes its contiguous block with independent or collective
``H5Dwrite`` calls, as h5bench does). Both go through :func:`write_vpic`, so the data, the timing
and the metrics are defined once.

``compute_time`` emulates the simulation's computation between steps as h5bench's
``EMULATED_COMPUTE_TIME_PER_TIMESTEP`` does: a sleep after each step's writes have returned,
none after the last step; writing behind (``async_writes``), the background writes go on
during it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from mpi4py import MPI

from ..files import File
from ..layout.vpic import BYTES_PER_PARTICLE, FIELDS, step_name
from ..mpi.collective import allgather_array, barrier
from ..units import parse_duration
from .metrics import Metrics, reduce_metrics

KERNEL_ATTR = "kernel"
KERNEL_NAME = "h5subfile-vpic"


def particle_values(name: str, step: int, gids: np.ndarray) -> np.ndarray:
    """The value of field ``name`` at ``step`` for global particle indices ``gids`` (exact)."""
    index = [n for n, _ in FIELDS].index(name)
    gids = np.asarray(gids, dtype=np.uint64)
    if name == "id_1":
        return (gids & np.uint64(0x7FFFFFFF)).astype(np.int32)
    mixed = gids * np.uint64(2654435761) + np.uint64(step * 40503 + index * 977)
    bits = (mixed & np.uint64(0xFFFFFF)).astype(np.float32)
    if name == "id_2":
        return bits
    return bits / np.float32(2**24) + np.float32(index + step)


class Sink(Protocol):
    """Where :func:`write_vpic` puts the steps: a context manager, opened and closed inside the
    timed region."""

    def __enter__(self) -> Sink: ...

    def __exit__(self, *exc_info: Any) -> Any: ...

    def set_attributes(self, attributes: dict[str, Any]) -> None: ...

    def write_step(self, name: str, data: dict[str, np.ndarray]) -> None: ...

    def raw_seconds(self) -> float:
        """Seconds this rank spent inside its data writes so far (writing behind: handing
        them over and waiting for them)."""
        ...

    def background_seconds(self) -> float | None:
        """Writing behind: the seconds of the background writes so far; None otherwise."""
        ...


def write_vpic(
    open_sink: Callable[[int, int], Sink],
    particles: int,
    steps: int,
    comm: MPI.Intracomm,
    progress: Callable[[int, int], None] | None = None,
    compute_time: float = 0.0,
) -> Metrics:
    """Collective: the VPIC-IO kernel, timed as h5bench does, writing through
    ``open_sink(first, total)`` (this rank's first particle, every rank's particles).

    Observed time runs from before the sink is opened to after it is closed (after a polled
    barrier, README *Kernel metrics*; data generation excluded: each step's values are made,
    then a barrier, untimed, so that no rank's I/O waits for another rank still making its
    data); raw time is what the sink spent inside its data writes, read after the close
    (writing behind, the close waits for the last writes). ``compute_time`` seconds of emulated computation follow each step but the last
    (h5bench's placement); they are left out of the observed time and counted in the observed
    time per step. ``progress(done, total)``, if given, is called with the steps written so
    far.
    """
    counts = [int(n) for n in allgather_array(comm, np.array([particles], dtype=np.int64))[:, 0]]
    first = sum(counts[: comm.rank])
    gids = np.arange(first, first + particles, dtype=np.uint64)
    excluded = computed = 0.0
    if progress:
        progress(0, steps)
    barrier(comm)
    started = time.perf_counter()
    with open_sink(first, sum(counts)) as sink:
        sink.set_attributes({KERNEL_ATTR: KERNEL_NAME, "particles_per_rank": counts})
        for step in range(steps):
            t = time.perf_counter()
            data = {name: particle_values(name, step, gids) for name, _ in FIELDS}
            barrier(comm)  # every rank starts the step's I/O together, as after h5bench's
            excluded += time.perf_counter() - t  # untimed data set-up
            sink.write_step(step_name(step), data)
            if progress:
                progress(step + 1, steps)
            if compute_time > 0 and step < steps - 1:  # h5bench: none after the last step
                t = time.perf_counter()
                time.sleep(compute_time)
                computed += time.perf_counter() - t
    raw, background = sink.raw_seconds(), sink.background_seconds()
    with_compute = time.perf_counter() - started - excluded
    return reduce_metrics(
        comm,
        "write",
        particles * BYTES_PER_PARTICLE * steps,
        raw,
        with_compute - computed,
        steps=steps,
        compute_seconds=computed,
        background_seconds=background,
    )


class _H5SubfileSink:
    """The kernel's steps through h5subfile: one ``write_datasets`` call per step, which
    creates the step's group with its eight datasets (the group and the datasets in h5bench's
    order, as ``H5Gcreate`` and then each ``H5Dcreate`` make them) and writes them: one
    agreement round per step, where a separate ``create_group`` call took two rounds more."""

    def __init__(
        self, path: str, comm: MPI.Intracomm, plan: dict[str, Any], profile: str | None = None
    ) -> None:
        self.file = File(path, "w", comm=comm, profile=profile, **plan)

    def __enter__(self) -> _H5SubfileSink:
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        return self.file.__exit__(*exc_info)

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        self.file.attrs.update(attributes)  # one call, whatever their number

    def write_step(self, name: str, data: dict[str, np.ndarray]) -> None:
        self.file.write_datasets({f"{name}/{field}": array for field, array in data.items()})
        plan = self.file.plan
        if plan is not None and plan.commit_every_step:
            self.file.commit()  # at once: a follower need not wait for the next step to start

    def raw_seconds(self) -> float:
        return self.file.stats.data_write_seconds

    def background_seconds(self) -> float | None:
        stats = self.file.stats
        return stats.write_seconds if stats.write_behind else None


class _PerDatasetSink(_H5SubfileSink):
    """The kernel's steps written a dataset per call, as a parallel h5py program writes them:
    each step's group and eight datasets created in one call, then each rank's slab of each
    dataset written in a call of its own. ``style``: ``blocks-each`` declares every rank's
    block at creation (``start``/``count``) and writes it with ``d.write(array)``;
    ``h5py-collective`` and ``h5py-independent`` create the datasets with their global shape
    alone (their layout is learned from the writes) and write ``d[first:first + count] =
    array``, inside ``with d.collective:`` or independently."""

    def __init__(
        self,
        path: str,
        comm: MPI.Intracomm,
        plan: dict[str, Any],
        profile: str | None,
        first: int,
        total: int,
        style: str,
    ) -> None:
        super().__init__(path, comm, plan, profile)
        self.first, self.total, self.style = first, total, style

    def write_step(self, name: str, data: dict[str, np.ndarray]) -> None:
        count = len(next(iter(data.values())))
        declared = self.style == "blocks-each"
        block = dict(start=(self.first,), count=(count,)) if declared else {}
        specs = {
            f"{name}/{f}": dict(shape=(self.total,), dtype=a.dtype, **block)
            for f, a in data.items()
        }
        mine = slice(self.first, self.first + count)
        for dataset, array in zip(self.file.create_datasets(specs), data.values()):
            if declared:
                dataset.write(array)
            elif self.style == "h5py-collective":
                with dataset.collective:
                    dataset[mine] = array
            else:
                dataset[mine] = array


#: How :func:`run_vpic` writes each step: declared blocks (``write_datasets``: one call per
#: step; or ``blocks-each``: a ``d.write`` call per dataset), or as a parallel h5py program
#: does (no blocks, each rank's slab written collectively or independently).
STYLES = ("blocks", "blocks-each", "h5py-collective", "h5py-independent")


def run_vpic(
    path: str,
    particles: int,
    steps: int,
    comm: MPI.Intracomm | None = None,
    progress: Callable[[int, int], None] | None = None,
    profile: str | None = None,
    compute_time: float | str = 0.0,
    style: str = "blocks",
    **plan: Any,
) -> Metrics:
    """Collective: write ``steps`` VPIC-IO steps of ``particles`` particles per rank to ``path``.

    ``plan`` goes to :class:`~h5subfile.File` (``subfiles``, ``ranks_per_subfile``, ``fsync``,
    ``async_writes``...), and so does ``profile`` (the folder the session's profile goes to;
    None: not profiled). ``compute_time``: emulated computation after each step but the last,
    in seconds or as ``"0.5s"``, ``"500ms"`` (see :func:`write_vpic`). ``style`` (one of
    :data:`STYLES`): the step's datasets created with each rank's block declared and written in
    one call (or one call per dataset), or created with their global shape alone and each
    rank's slab written as a parallel h5py program writes it (collectively or independently).
    """
    comm = MPI.COMM_WORLD if comm is None else comm
    seconds = parse_duration(compute_time)
    if style not in STYLES:
        raise ValueError(f"style={style!r}: expected one of {', '.join(STYLES)}")

    def open_sink(first: int, total: int) -> Sink:
        if style != "blocks":
            return _PerDatasetSink(path, comm, plan, profile, first, total, style)
        return _H5SubfileSink(path, comm, plan, profile)

    return write_vpic(open_sink, particles, steps, comm, progress, seconds)


class _ParallelHDF5Sink:
    """The kernel's steps through parallel HDF5 (h5py's ``mpio`` driver) into one shared file,
    as h5bench writes them: per step a group and its eight datasets (default properties:
    contiguous, allocated at creation, no fill), then one ``H5Dwrite`` of this rank's contiguous
    block per dataset, independent or collective."""

    def __init__(
        self, path: str, comm: MPI.Intracomm, first: int, count: int, total: int, collective: bool
    ) -> None:
        import h5py
        from h5py import h5fd, h5p

        self.first, self.count, self.total = first, count, total
        self.raw = 0.0
        self.file = h5py.File(path, "w", driver="mpio", comm=comm)
        self.dxpl = h5p.create(h5p.DATASET_XFER)
        self.dxpl.set_dxpl_mpio(h5fd.MPIO_COLLECTIVE if collective else h5fd.MPIO_INDEPENDENT)

    def __enter__(self) -> _ParallelHDF5Sink:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.file.close()

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        for name, value in attributes.items():
            self.file.attrs[name] = value

    def write_step(self, name: str, data: dict[str, np.ndarray]) -> None:
        from h5py import h5s

        group = self.file.create_group(name)
        datasets = [group.create_dataset(f, (self.total,), dtype=a.dtype) for f, a in data.items()]
        if not self.total:
            return  # nothing to write (and HDF5 cannot select in an empty dataset)
        memory = h5s.create_simple((self.count,))
        for dataset, array in zip(datasets, data.values()):
            space = dataset.id.get_space()
            if self.count:
                space.select_hyperslab((self.first,), (self.count,))
            else:
                space.select_none()  # still takes part in a collective write
            t = time.perf_counter()
            dataset.id.write(memory, space, array, dxpl=self.dxpl)
            self.raw += time.perf_counter() - t

    def raw_seconds(self) -> float:
        return self.raw

    def background_seconds(self) -> float | None:
        return None


def run_vpic_phdf5(
    path: str,
    particles: int,
    steps: int,
    comm: MPI.Intracomm | None = None,
    progress: Callable[[int, int], None] | None = None,
    collective: bool = False,
    compute_time: float | str = 0.0,
) -> Metrics:
    """Collective: the same kernel through parallel HDF5 into one shared file (the baseline
    h5subfile is measured against). Needs an h5py built with MPI (``make phdf5``)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    seconds = parse_duration(compute_time)

    def open_sink(first: int, total: int) -> Sink:
        return _ParallelHDF5Sink(path, comm, first, particles, total, collective)

    return write_vpic(open_sink, particles, steps, comm, progress, seconds)
