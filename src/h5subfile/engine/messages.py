"""What ranks send each other, and what each rank keeps of a dataset it writes: frozen, named.

The dataset-creation protocol (:mod:`.create`) runs in four steps, each a message type:

1. every rank sends rank 0 its :class:`DatasetRequest` per dataset;
2. rank 0 plans (:class:`PlannedDataset`) and answers every rank with a
   :class:`RankAssignment`: its block of each dataset and, for group leaders, the
   :class:`LeaderTask` of each source dataset to create;
3. leaders create their sources and send rank 0 the byte offsets (:data:`SourceOffsets`);
4. rank 0 publishes the master and sends every rank what it learns of the new datasets; when
   each rank creates the only extent it holds and the call writes (file per process), each
   rank already knows that from its assignment (:class:`OwnView`) and its own offsets, so step
   4 has no answer: rank 0's failure to publish is raised by the write's closing round.

Each rank then holds a :class:`WriteTarget` per dataset: where its bytes go. A write is a
:class:`WriteRequest`, checked into a :class:`PreparedWrite` and moved by its :class:`Transfer`;
the two-phase transfer gathers every rank's runs (:class:`FileRun`), the chunked one sends each
group's leader its compressed chunks (:class:`CompressedChunk`, or :class:`CompressionFailed`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..io.filters import FilterSpec
from ..layout.blocks import Block
from ..layout.chunking import ChunkChoice, ChunkWork, Member
from ..layout.record import DatasetLayout, StoredExtent


@dataclass(frozen=True)
class Storage:
    """How a dataset is stored: contiguous, or chunked (``chunks``: True = the plan picks,
    or a shape) with ``filters``."""

    chunks: bool | tuple[int, ...] | None = None
    filters: FilterSpec = FilterSpec()

    @property
    def chunked(self) -> bool:
        return self.chunks is not None


CONTIGUOUS = Storage()


class RequestKind(enum.Enum):
    """How a dataset's shape and blocks are given."""

    EXPLICIT = "explicit"  # the shape is given; each rank declares its block
    PREFIX = "prefix"  # blocks along axis 0 at the prefix sum of the ranks' lengths
    CORNER = "corner"  # blocks at given corners; the shape is the end of their union


@dataclass(frozen=True)
class DatasetRequest:
    """One rank's request to create a dataset (what create_dataset/write_dataset were given)."""

    path: str
    dtype: np.dtype
    kind: RequestKind
    shape: tuple[int, ...] | None
    block: Block
    storage: Storage = CONTIGUOUS
    #: this rank gave a block (``block=`` or ``start=``/``count=``); when no rank does, the
    #: dataset's layout is learned from the writes (engine/learned.py)
    declared: bool = True
    maxshape: tuple[int, ...] = ()  # -1: unlimited; (): the shape
    fill: bytes | None = None  # the fill value's bytes (one element); None: zeros
    #: ``create_dataset(data=...)``: the checksum of the data, which every rank passes alike
    data_digest: str = ""

    def __reduce__(self) -> tuple[type[DatasetRequest], tuple[Any, ...]]:
        """Pickled as a call with its fields, the last ones only when set: every rank sends
        rank 0 one per dataset it creates."""
        fields: tuple[Any, ...] = (
            self.path,
            self.dtype,
            self.kind,
            self.shape,
            self.block,
            self.storage,
            self.declared,
            self.maxshape,
            self.fill,
            self.data_digest,
        )
        while len(fields) > 5 and fields[-1] == _REQUEST_DEFAULTS[len(fields) - 6]:
            fields = fields[:-1]
        return type(self), fields

    @property
    def signature(self) -> tuple[Any, ...]:
        """What every rank must pass identically (checked by rank 0)."""
        dtype = self.dtype.str if self.dtype.fields is None else self.dtype.descr
        common = (self.path, dtype, self.kind.value, self.storage)
        if self.kind is RequestKind.EXPLICIT:
            return (*common, self.shape, self.maxshape, self.fill, self.data_digest)
        if self.kind is RequestKind.PREFIX:
            return (*common, self.block.count[1:])
        return (*common, len(self.block.count))


#: DatasetRequest's fields after ``block``, at their defaults (left out when pickled).
_REQUEST_DEFAULTS: tuple[Any, ...] = (CONTIGUOUS, True, (), None, "")


@dataclass(frozen=True)
class PlannedDataset:
    """Rank 0's plan for one new dataset: its extents (offsets still unknown: -1), each with
    the group whose leader creates it."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    in_master: bool
    extents: tuple[StoredExtent, ...]
    groups: tuple[int, ...]
    choice: ChunkChoice | None = None
    filters: FilterSpec = FilterSpec()
    replaces_unfinished: bool = False
    #: no rank declared a block: each group's source holds the whole dataset, pieces are
    #: learned from the writes (engine/learned.py)
    learned: bool = False
    maxshape: tuple[int, ...] = ()
    fill: bytes | None = None


@dataclass(frozen=True)
class ChunkPlacement:
    """Where a rank's block of a chunked dataset goes: the blocks of every rank of its extent
    (extent coordinates), and the leader whose HDF5 handle writes the compressed chunks."""

    members: tuple[Member, ...]
    leader: int
    filters: FilterSpec


@dataclass(frozen=True)
class BlockAssignment:
    """One rank's part of one new dataset: its block and the extent storing it (None when the
    rank writes nothing)."""

    block: Block
    extent: int | None
    chunks: ChunkPlacement | None = None


@dataclass(frozen=True)
class LeaderTask:
    """A source dataset a group leader creates: in its subfile, or (single-group sessions) as
    the dataset itself in the master."""

    dataset: int  # index of the dataset in the call
    extent: int  # index of the extent in the dataset's layout
    in_master: bool
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...] | None = None  # the source's chunk shape; None: contiguous
    filters: FilterSpec = FilterSpec()
    #: the fill value (one element's bytes) of a dataset made in the master (a scalar, a
    #: compressed dataset), whose unwritten elements are its own; None: zeros, or a source
    #: (a virtual dataset's mappings leave its unwritten elements to its own fill value)
    fill: bytes | None = None


@dataclass(frozen=True)
class OwnView:
    """What a rank will know of one new dataset, told with its assignment when the rank itself
    creates the only extent it will hold (file per process, in a call that writes): all but
    that extent's offset, which the rank learns by creating it, so no answer from rank 0 after
    the sources are created is needed (see :func:`.creation_plan.own_views`)."""

    shape: tuple[int, ...]  # the dataset's
    storage: str  # as ``info`` shows it (from the whole layout)
    layout: DatasetLayout  # the record's other fields, without extents (one object per dataset)
    extent: StoredExtent | None  # this rank's, its offset still -1 (None: it holds none)
    local_view: bool  # the layout is trimmed to this rank's extent
    fill: bytes | None = None  # the dataset's fill value (a dataset whose layout is learned)


@dataclass(frozen=True)
class RankAssignment:
    """Rank 0's answer to one rank after planning a creation call."""

    paths: tuple[str, ...]
    blocks: tuple[BlockAssignment, ...]  # one per dataset, in call order
    tasks: tuple[LeaderTask, ...]  # empty unless the rank leads a group
    #: one per dataset when every rank creates the extent it holds and the call writes (the
    #: same on every rank: rank 0 decides); None: rank 0 answers once it has published
    own: tuple[OwnView, ...] | None = None
    #: the datasets as this rank learns them, when rank 0 led every source and so published
    #: within the planning (one round); None: they come in a second round
    views: dict[str, Any] | None = None


#: Byte offset of each created source, by (dataset index, extent index); -1 when chunked.
SourceOffsets = dict[tuple[int, int], int]


class Transfer(enum.Enum):
    """How a dataset's bytes travel from the ranks to the disk (chosen once per dataset)."""

    DIRECT = "direct"  # every rank writes its own bytes at their offsets
    TWO_PHASE = "two-phase"  # aggregators gather the bytes of a file and write large pieces
    CHUNKED = "chunked"  # ranks compress whole chunks; the group's leader writes them


@dataclass(frozen=True)
class ChunkTarget:
    """What a rank does for a chunked dataset: its chunk work, and where chunks go."""

    work: ChunkWork
    chunks: tuple[int, ...]  # the extent's chunk shape
    extent_shape: tuple[int, ...]
    filters: FilterSpec
    leader: int  # the rank whose HDF5 handle writes the chunks (the group's leader)
    sink: str  # the dataset's name in the leader's file


@dataclass(frozen=True)
class WriteTarget:
    """Where a rank writes its block of a dataset created in this session."""

    block: Block
    file: str  # absolute path
    offset: int  # byte offset of the extent's data in the file (-1 if chunked)
    extent: Block  # the extent's box, in dataset coordinates
    group: int
    transfer: Transfer
    chunked: ChunkTarget | None = None
    #: a source of a dataset whose layout is learned (engine/learned.py): ``block`` is the
    #: extent itself, and the writes' pieces are accounted there
    learned: bool = False


class _WholeBlock:
    """The selection of a write of a rank's whole block."""

    def __repr__(self) -> str:
        return "WHOLE_BLOCK"


WHOLE_BLOCK: Any = _WholeBlock()


class _RootWrites:
    """The selection of a write of a whole dataset by rank 0 alone (``create_dataset(data=)``,
    ``group[name] = array``: every rank passes the same array, as with h5py's mpio driver)."""

    def __repr__(self) -> str:
        return "ROOT_WRITES"


ROOT_WRITES: Any = _RootWrites()


class WriteRequest(NamedTuple):
    """One rank's write to one dataset: ``data`` for ``selection`` (a box inside its block, in
    numpy/h5py index form) or for its whole block. Local to the rank (a named tuple: it is
    made on every ``dset[box] = data``, where a few microseconds count)."""

    path: str
    data: Any
    selection: Any = WHOLE_BLOCK


class PreparedWrite(NamedTuple):
    """A validated write: C-contiguous ``data`` of the dataset's dtype, shaped like ``box``
    (local to the rank, like :class:`WriteRequest`)."""

    path: str
    target: WriteTarget
    box: Block
    data: np.ndarray


@dataclass(frozen=True)
class CompressedChunk:
    """A chunk a rank compressed, on its way to its group's leader (one gather per round)."""

    sink: str  # the source dataset's name in the leader's file
    offset: tuple[int, ...]  # the chunk's corner in the source dataset
    mask: int  # HDF5's filter mask (filters skipped)
    data: bytes


@dataclass(frozen=True)
class CompressionFailed:
    """Sent to the leader instead of a round's chunks when compressing failed on a rank."""

    rank: int
    message: str


@dataclass(frozen=True)
class FileRun:
    """One rank's run of bytes for two-phase I/O (gathered from every rank)."""

    file: str  # path
    group: int  # the subfile's group (-1 when reading: aggregators are spread over readers)
    offset: int
    nbytes: int
