"""One backend per API; each moves the same bytes to the same logical places.

Logical layout (IOR's): rank r's transfer t of segment s covers bytes
``[r*B + t*T, r*B + (t+1)*T)`` of segment s (B = block, T = transfer). In a shared file a segment
starts at ``s*B*P``; with file per process (-F) each rank has its own file and segment s starts
at ``s*B``. HDF5 APIs store each segment as a 1-D uint64 dataset ``segment_<s>``.

Profiled (``h5subfile bench --profile DIR``, docs/PROFILING.md): the h5subfile APIs through their
``File(..., profile=DIR)``; ``posix`` through ``RawFile``'s own counting of its system calls;
``mpiio`` by counting the MPI-IO calls it makes in the same counters, labelled
``MPIIO-AS-POSIX``; ``phdf5`` is not profiled.
"""

from __future__ import annotations

import os
import platform
import time
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from mpi4py import MPI

from .._version import __version__
from ..errors import CorruptFileError
from ..io.posix import IOStats, RawFile, as_bytes, block_size
from ..profiler.counters import PosixRecord, Profile
from .options import BenchOptions


class Unavailable(Exception):
    """An API that cannot run here (e.g. phdf5 without an MPI-enabled h5py)."""


class Backend(ABC):
    """The I/O of one API for one phase (write or read) of one iteration."""

    name = ""
    #: The module name of the records this backend's own profile holds (what they count);
    #: "" when it keeps none (the h5subfile APIs are profiled by their File, phdf5 not at all).
    counted = ""

    def __init__(
        self, options: BenchOptions, comm: MPI.Intracomm, profile: str | None = None
    ) -> None:
        self.options = options
        self.comm = comm
        self.rank = comm.rank
        self.size = comm.size
        self.file_comm = MPI.COMM_SELF if options.file_per_proc else comm
        #: the folder this backend's phases are profiled into (None: not profiled)
        self.profile_folder = profile
        #: the running phase's profile on this rank (backends that count their own calls)
        self.profile: Profile | None = None
        self.profile_started = 0.0

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this API cannot run here, with how to fix it; None when it can."""
        return None

    @staticmethod
    def version() -> str:
        return ""

    def path(self, rank: int) -> str:
        """The file holding ``rank``'s data."""
        base = self.options.test_file
        return f"{base}.{rank:08d}" if self.options.file_per_proc else base

    def paths(self) -> list[str]:
        """Every file this API creates for the whole job (for removal between iterations)."""
        if self.options.file_per_proc:
            return [self.path(r) for r in range(self.size)]
        return [self.options.test_file]

    def offset(self, rank: int, segment: int, within: int) -> int:
        """Byte offset of ``within`` (bytes into ``rank``'s block of ``segment``) in its file."""
        block = self.options.block
        if self.options.file_per_proc:
            return segment * block + within
        return segment * block * self.size + rank * block + within

    @abstractmethod
    def open(self, writing: bool, source_rank: int) -> None:
        """Open for the phase; ``source_rank`` is whose data this rank reads (-C)."""

    @abstractmethod
    def transfer(self, writing: bool, segment: int, within: int, words: np.ndarray) -> None:
        """Write ``words`` at, or read into ``words`` from, this rank's (or the source's) block."""

    def operations_per_block(self, writing: bool) -> int:
        """I/O calls per rank per block in a phase (IOR's OPs): one per transfer."""
        return self.options.transfers_per_block

    @classmethod
    def holds_buffers(cls, options: BenchOptions) -> bool:
        """Whether the writes are made from the caller's buffers after the calls return:
        then each transfer of a block is written from a buffer of its own."""
        return False

    def prepare(self) -> None:  # noqa: B027 - optional
        """Untimed set-up before the first phase (imports, as IOR never times its own loading)."""

    def sync(self) -> None:  # noqa: B027 - optional
        """Flush written data to storage (-e)."""

    @abstractmethod
    def close(self) -> None:
        """Close the phase's files."""

    def describe(self) -> dict[str, Any]:
        """API-specific facts for the report (plan, driver settings...)."""
        return {}

    def profile_name(self) -> str:
        """The name of this API's profiles, ``DIR/<name>.write.json``: the test file's name,
        followed by the API unless it already ends with it (several APIs in one run)."""
        name = os.path.basename(self.options.test_file)
        return name if name.endswith(f".{self.options.api}") else f"{name}.{self.options.api}"

    def start_profile(self) -> None:
        """Collective, before a phase's open: this rank's profile of the phase, when the
        backend counts its own calls and is profiled."""
        if self.profile_folder is not None and self.counted:
            from ..engine.profiling import new_profile, start_profile  # h5py: only when asked

            self.profile = new_profile(self.rank)
            self.profile_started = start_profile(self.comm, self.profile)

    def finish_profile(self, writing: bool) -> None:
        """Collective, after a phase's close: rank 0 writes the phase's profile,
        ``DIR/<profile_name>.write.json`` (``.read.json``) and ``.txt``."""
        profile, self.profile = self.profile, None
        if profile is None or self.profile_folder is None:
            return
        from ..engine.profiling import finish_profile

        mode = "w" if writing else "r"
        finish_profile(
            self.comm,
            profile,
            self.profile_folder,
            self.profile_name(),
            mode,
            self.profile_started,
            module=self.counted,
        )


class PosixBackend(Backend):
    """Raw positioned reads and writes (the ceiling any library is measured against)."""

    name = "posix"
    counted = "POSIX"  # RawFile records each of its system calls

    @staticmethod
    def version() -> str:
        return f"POSIX ({platform.system()} {platform.release()})"

    def open(self, writing: bool, source_rank: int) -> None:
        self.source = source_rank
        self.stats = IOStats(profile=self.profile)
        target = self.rank if writing else source_rank
        self.file = RawFile(self.path(target), writable=writing, stats=self.stats, create=writing)

    def transfer(self, writing: bool, segment: int, within: int, words: np.ndarray) -> None:
        owner = self.rank if writing else self.source
        offset = self.offset(owner, segment, within)
        if writing:
            self.file.pwrite(as_bytes(words), offset)
        else:
            self.file.pread_into(as_bytes(words), offset)

    def sync(self) -> None:
        self.file.sync()

    def close(self) -> None:
        self.file.close()


class MPIIOBackend(Backend):
    """MPI-IO through mpi4py: independent (``Write_at``) or collective (``Write_at_all``, -c).

    Profiled, each MPI-IO call it makes is counted as the POSIX counters count a system call
    (module ``MPIIO-AS-POSIX``, docs/PROFILING.md): ``File.Open`` an open, each
    ``Write_at[_all]``/``Read_at[_all]`` one write or read of the bytes its status returns at
    its byte offset, ``Sync`` an fsync, ``Close`` a close; not the system calls the MPI library
    makes underneath."""

    name = "mpiio"
    counted = "MPIIO-AS-POSIX"
    record: PosixRecord | None = None

    @staticmethod
    def version() -> str:
        return MPI.Get_library_version().splitlines()[0].strip()

    def info(self) -> MPI.Info:
        info = MPI.Info.Create()
        for key, value in self.options.hints:
            info.Set(key, value)
        return info

    def open(self, writing: bool, source_rank: int) -> None:
        self.source = source_rank
        target = self.rank if writing else source_rank
        mode = (MPI.MODE_CREATE | MPI.MODE_WRONLY) if writing else MPI.MODE_RDONLY
        info = self.info()
        path = self.path(target)
        started = time.monotonic()
        try:
            self.fh = MPI.File.Open(self.file_comm, path, mode, info)
        finally:
            info.Free()
        self.record = None
        if self.profile is not None:
            self.record = self.profile.record(os.path.abspath(path))
            self.record.record_open(started, time.monotonic(), block_size(path))

    def transfer(self, writing: bool, segment: int, within: int, words: np.ndarray) -> None:
        owner = self.rank if writing else self.source
        offset = self.offset(owner, segment, within)
        collective = self.options.collective
        if writing:
            call = self.fh.Write_at_all if collective else self.fh.Write_at
        else:
            call = self.fh.Read_at_all if collective else self.fh.Read_at
        record = self.record
        if record is None:
            call(offset, words)
            return
        assert self.profile is not None
        aligned = self.profile.aligned(as_bytes(words))
        status = MPI.Status()
        started = time.monotonic()
        call(offset, words, status)
        ended = time.monotonic()
        moved = status.Get_count(MPI.BYTE)
        (record.record_write if writing else record.record_read)(
            offset, moved, started, ended, aligned
        )

    def sync(self) -> None:
        started = time.monotonic()
        self.fh.Sync()
        if self.record is not None:
            self.record.record_fsync(started, time.monotonic())

    def close(self) -> None:
        started = time.monotonic()
        self.fh.Close()
        if self.record is not None:
            self.record.record_close(started, time.monotonic())
            self.record = None

    def effective_hints(self) -> dict[str, str]:
        """The hints the MPI library reports for an open file (MPI_File_get_info)."""
        info = self.fh.Get_info()
        try:
            return dict(info.items())
        finally:
            info.Free()


class _HDF5Layout(Backend):
    """Shared by the HDF5 APIs: one 1-D uint64 dataset per segment."""

    def dataset_shape(self) -> int:
        words = self.options.block // 8
        return words if self.options.file_per_proc else words * self.size

    def block_start(self, rank: int) -> int:
        return 0 if self.options.file_per_proc else rank * (self.options.block // 8)

    def names(self) -> list[str]:
        return [f"segment_{s:04d}" for s in range(self.options.segments)]


class H5SubfileBackend(_HDF5Layout):
    """h5subfile: ``hdf5`` writes one conventional shared file, ``subfile`` uses subfiling.

    Transfers are independent positioned writes (``dset[a:b] = words``) and direct reads
    (``read_direct``); with -c they are collective (``with dset.collective:``), served by the
    plan's aggregators (two-phase I/O) when it has any.

    With compression (the plan's ``compression``: chunked datasets, whose chunks are compressed
    whole) each rank writes its whole block of a segment in one collective ``write``: the
    transfers are copied into a block buffer (memory: one block per rank) and the last one of
    the block writes it. Reads stay IOR's transfers (HDF5 decompresses the chunks they touch).
    """

    name = "subfile"
    whole_blocks = False  # set when the write phase opens chunked datasets

    @staticmethod
    def version() -> str:
        import h5py

        return f"h5subfile {__version__} (h5py {h5py.version.version}, HDF5 {h5py.version.hdf5_version})"

    def prepare(self) -> None:
        from .. import files  # noqa: F401 - imports h5py and the library outside the timing

    def plan(self) -> dict[str, Any]:
        storage = {k: v for k, v in self.options.plan.items() if v is not None}
        if self.options.alignment:
            storage["alignment"] = self.options.alignment
        if self.options.api == "hdf5":
            return {"subfiles": 1, **storage}
        return {
            "subfiles": self.options.subfiles,
            "ranks_per_subfile": self.options.ranks_per_subfile,
            **storage,
        }

    def read_plan(self) -> dict[str, Any]:
        from ..plan import READ_FIELDS

        return {k: v for k, v in self.plan().items() if k in READ_FIELDS}

    def open(self, writing: bool, source_rank: int) -> None:
        from ..files import Dataset, File

        self.source = source_rank
        words = self.options.block // 8
        if writing:
            self.file = File(
                self.path(self.rank),
                "w",
                comm=self.file_comm,
                fsync=self.options.fsync,
                profile=self.profile_folder,
                **self.plan(),
            )
            start = self.block_start(self.rank)
            specs = {
                name: dict(
                    shape=(self.dataset_shape(),), dtype="u8", start=(start,), count=(words,)
                )
                for name in self.names()
            }
            self.datasets = self.file.create_datasets(specs)
            # chunked (compressed) datasets are written whole: their chunks are compressed whole
            self.whole_blocks = any(d.chunks is not None for d in self.datasets)
            if self.whole_blocks:
                self.block = np.empty(words, dtype=np.uint64)
        else:
            self.file = File(
                self.path(source_rank),
                "r",
                comm=self.file_comm,
                profile=self.profile_folder,
                **self.read_plan(),
            )
            self.datasets = []
            for name in self.names():
                dataset = self.file[name]
                if not isinstance(dataset, Dataset):
                    raise CorruptFileError(
                        f"{self.file.filename}: /{name} is a group, not a dataset"
                    )
                self.datasets.append(dataset)

    def operations_per_block(self, writing: bool) -> int:
        return 1 if writing and self.whole_blocks else self.options.transfers_per_block

    @classmethod
    def holds_buffers(cls, options: BenchOptions) -> bool:
        """Whether writes are made from the caller's arrays after the calls return
        (``async_zero_copy``): then each transfer of a block needs its own buffer, and the
        buffers are used again only after a flush, at the end of each block."""
        return bool(options.plan.get("async_zero_copy"))

    def transfer(self, writing: bool, segment: int, within: int, words: np.ndarray) -> None:
        if writing and self.whole_blocks:
            self.block[within // 8 : within // 8 + words.size] = words
            if within + words.nbytes == self.options.block:  # the block's last transfer
                self.datasets[segment].write(self.block)
            return
        owner = self.rank if writing else self.source
        first = self.block_start(owner) + within // 8
        region = slice(first, first + words.size)
        dataset = self.datasets[segment]
        if self.options.collective:
            with dataset.collective:
                if writing:
                    dataset[region] = words
                else:
                    words[...] = dataset[region]
        elif writing:
            dataset[region] = words
        else:
            dataset.read_direct(words, region)
        last = within + words.nbytes == self.options.block
        if writing and last and segment + 1 < self.options.segments:
            if self.holds_buffers(self.options):
                self.file.flush()  # the next block's transfers use the same buffers

    def close(self) -> None:
        self.file.close()

    def describe(self) -> dict[str, Any]:
        grouping = getattr(getattr(self, "file", None), "grouping", None)
        return {"plan": self.plan(), "grouping": None if grouping is None else grouping.describe()}


class PHDF5Backend(_HDF5Layout):
    """Parallel HDF5 through h5py's mpio driver: collective (-c) or independent transfers, with
    options for collective metadata, alignment and no fill."""

    name = "phdf5"

    @classmethod
    def unavailable(cls) -> str | None:
        import h5py

        if not h5py.get_config().mpi:
            return (
                "phdf5: unavailable: this h5py is built without MPI (the PyPI wheel is serial); "
                "run `make phdf5` and use .venv-phdf5/bin/h5subfile (or .venv-phdf5/bin/python -m "
                "h5subfile) to include parallel HDF5"
            )
        return None

    @staticmethod
    def version() -> str:
        import h5py

        return f"h5py {h5py.version.version} (parallel HDF5 {h5py.version.hdf5_version})"

    def prepare(self) -> None:
        import h5py  # noqa: F401 - outside the timing

    def open(self, writing: bool, source_rank: int) -> None:
        import h5py
        from h5py import h5d, h5f, h5fd, h5p, h5s, h5t

        self.source = source_rank
        options = self.options
        fapl = h5p.create(h5p.FILE_ACCESS)
        info = MPI.Info.Create()
        for key, value in options.hints:
            info.Set(key, value)
        fapl.set_fapl_mpio(self.file_comm, info)
        info.Free()
        if options.alignment:
            fapl.set_alignment(1, options.alignment)
        if options.coll_metadata:
            set_collective_metadata(fapl.id)
        target = self.rank if writing else source_rank
        name = self.path(target).encode()
        if writing:
            self.fid = h5f.create(name, h5f.ACC_TRUNC, fapl=fapl)
        else:
            self.fid = h5f.open(name, h5f.ACC_RDONLY, fapl=fapl)
        self.h5 = h5py.File(self.fid)
        self.dxpl = h5p.create(h5p.DATASET_XFER)
        self.dxpl.set_dxpl_mpio(
            h5fd.MPIO_COLLECTIVE if options.collective else h5fd.MPIO_INDEPENDENT
        )
        self.datasets = []
        for dataset in self.names():
            if writing:
                dcpl = h5p.create(h5p.DATASET_CREATE)
                dcpl.set_alloc_time(h5d.ALLOC_TIME_EARLY)
                if options.no_fill:
                    dcpl.set_fill_time(h5d.FILL_TIME_NEVER)
                space = h5s.create_simple((self.dataset_shape(),))
                self.datasets.append(
                    h5d.create(self.fid, dataset.encode(), h5t.STD_U64LE, space, dcpl=dcpl)
                )
            else:
                self.datasets.append(h5d.open(self.fid, dataset.encode()))

    def transfer(self, writing: bool, segment: int, within: int, words: np.ndarray) -> None:
        from h5py import h5s

        owner = self.rank if writing else self.source
        dataset = self.datasets[segment]
        file_space = dataset.get_space()
        file_space.select_hyperslab((self.block_start(owner) + within // 8,), (words.size,))
        memory_space = h5s.create_simple((words.size,))
        if writing:
            dataset.write(memory_space, file_space, words, dxpl=self.dxpl)
        else:
            dataset.read(memory_space, file_space, words, dxpl=self.dxpl)

    def sync(self) -> None:
        self.h5.flush()

    def close(self) -> None:
        self.datasets = []
        self.h5.close()

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {"coll_metadata": o.coll_metadata, "alignment": o.alignment, "no_fill": o.no_fill}


def hdf5_c_function(name: str) -> Any:
    """A function of the HDF5 C library h5py has loaded (for the few h5py does not wrap)."""
    import ctypes

    import h5py  # noqa: F401 - loads libhdf5

    with open("/proc/self/maps") as maps:
        paths = {
            line.split()[-1]
            for line in maps
            if "libhdf5" in line and ".so" in line and "hl" not in line.rsplit("/", 1)[-1]
        }
    for path in sorted(paths):
        function = getattr(ctypes.CDLL(path), name, None)
        if function is not None:
            return function
    raise Unavailable(f"{name} not found in the HDF5 library h5py uses ({sorted(paths)})")


def set_collective_metadata(fapl_id: int) -> None:
    """H5Pset_all_coll_metadata_ops + H5Pset_coll_metadata_write (HDF5 >= 1.10; not in h5py)."""
    import ctypes

    for name in ("H5Pset_all_coll_metadata_ops", "H5Pset_coll_metadata_write"):
        function = hdf5_c_function(name)
        function.argtypes = [ctypes.c_int64, ctypes.c_bool]
        if function(fapl_id, True) < 0:
            raise RuntimeError(f"{name} failed")


BACKENDS: dict[str, type[Backend]] = {
    "posix": PosixBackend,
    "mpiio": MPIIOBackend,
    "hdf5": H5SubfileBackend,
    "subfile": H5SubfileBackend,
    "phdf5": PHDF5Backend,
}


def remove_files(backend: Backend) -> None:
    """Remove every test file of the API (and h5subfile's partial masters and subfiles)."""
    from ..io.master import remove_subfiles
    from ..layout.names import partial_path, subfile_folder

    for path in backend.paths():
        for victim in (path, partial_path(path)):
            if os.path.exists(victim):
                os.remove(victim)
        remove_subfiles(subfile_folder(path))
