"""h5subfile: parallel HDF5 I/O for MPI applications, built on subfiling.

Ranks are grouped; each group writes its part of every dataset into its own HDF5 subfile, and a
small master file stitches the parts together with Virtual Datasets, so that every HDF5 tool sees
one plain dataset.
"""

from ._version import __version__
from .errors import (
    BlockError,
    ChecksumError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    CorruptFileError,
    DamagedFileError,
    DataShapeError,
    DifferentValuesWarning,
    FileBusyError,
    FileExistsH5SubfileError,
    FileModeError,
    FollowTimeoutError,
    H5SubfileError,
    IncompleteFileError,
    MissingFileError,
    NotRegularFileError,
    ObjectExistsError,
    ObjectNotFoundError,
    OverlapError,
    PermissionDeniedError,
    PlanError,
    RankFailedError,
    RankIOError,
    RankTypeError,
    RankValueError,
    SameFileError,
    SelectionError,
    SubfileMismatchError,
    TruncatedFileError,
    UnsafePathError,
    UnsupportedDtypeError,
    UnsupportedError,
    UnsupportedLinkError,
    WriterStoppedError,
)
from .layout.blocks import Block
from .layout.references import ObjectRef
from .plan import Plan

__all__ = [
    "AttributeManager",
    "Block",
    "BlockError",
    "ChecksumError",
    "CollectiveMismatchError",
    "CollectiveTimeoutError",
    "CorruptFileError",
    "DamagedFileError",
    "DataShapeError",
    "Dataset",
    "Datatype",
    "DifferentValuesWarning",
    "File",
    "FileBusyError",
    "FileExistsH5SubfileError",
    "FileModeError",
    "FollowTimeoutError",
    "Group",
    "H5SubfileError",
    "IncompleteFileError",
    "MissingFileError",
    "NotRegularFileError",
    "ObjectExistsError",
    "ObjectRef",
    "ObjectNotFoundError",
    "OverlapError",
    "PermissionDeniedError",
    "Plan",
    "PlanError",
    "RankFailedError",
    "RankIOError",
    "RankTypeError",
    "RankValueError",
    "SameFileError",
    "SelectionError",
    "SubfileMismatchError",
    "TruncatedFileError",
    "UnsafePathError",
    "UnsupportedDtypeError",
    "UnsupportedError",
    "UnsupportedLinkError",
    "WriterStoppedError",
    "__version__",
    "follow",
]


_MPI_OBJECTS = ("AttributeManager", "Dataset", "Datatype", "File", "Group")


def __getattr__(name: str):  # PEP 562: importing h5subfile does not initialise MPI by itself
    if name == "follow":
        from .following import follow

        return follow
    if name in _MPI_OBJECTS:
        from . import files

        return getattr(files, name)
    raise AttributeError(f"module 'h5subfile' has no attribute {name!r}")
