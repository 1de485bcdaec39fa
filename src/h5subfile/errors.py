"""Exception hierarchy.

Every exception h5subfile raises derives from :class:`H5SubfileError` and from the built-in
exception a user would naturally catch (``ValueError``, ``FileNotFoundError``, ``OSError``, ...),
so ``except ValueError`` keeps working.

An exception that was agreed collectively (raised identically on every rank) carries
``collective = True``; the CLI uses it to print the message once instead of aborting the job.
"""

from __future__ import annotations


class H5SubfileError(Exception):
    """Base class of every h5subfile error."""

    collective: bool = False


class CollectiveMismatchError(H5SubfileError, ValueError):
    """Ranks called a collective operation with different arguments, or made different
    collective calls (one skipped or reordered a call, or left the file after an error)."""

    out_of_step: bool = False  # different calls (not arguments): the ranks abandon the file


class CollectiveTimeoutError(H5SubfileError, TimeoutError):
    """Some ranks did not arrive at a collective call within ``H5SUBFILE_COLLECTIVE_TIMEOUT``
    seconds; the message names them and where the others waited."""


class BlockError(H5SubfileError, ValueError):
    """A declared block lies outside the dataset's shape or overlaps another rank's block."""


class DataShapeError(H5SubfileError, ValueError):
    """Data passed to a write does not match the rank's block (shape) or the dataset (dtype)."""


class UnsupportedDtypeError(H5SubfileError, TypeError):
    """A numpy dtype h5subfile cannot store."""


class PlanError(H5SubfileError, ValueError):
    """An invalid plan value (grouping, sizes, ...)."""


class SelectionError(H5SubfileError, IndexError):
    """A read selection that does not fit the dataset."""


class FileModeError(H5SubfileError, ValueError):
    """An operation the file's mode does not allow, or an unknown mode."""


class ObjectExistsError(H5SubfileError, ValueError):
    """A group or dataset with that name already exists."""


class FileExistsH5SubfileError(H5SubfileError, FileExistsError):
    """Mode "w-"/"x" on a file that exists."""


class ObjectNotFoundError(H5SubfileError, KeyError):
    """No group, dataset or attribute with that name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class MissingFileError(H5SubfileError, FileNotFoundError):
    """A master file or subfile that does not exist."""


class IncompleteFileError(H5SubfileError, OSError):
    """A file, session or dataset whose writer did not finish."""


class TruncatedFileError(H5SubfileError, OSError):
    """A subfile shorter than the data it must hold."""


class CorruptFileError(H5SubfileError, OSError):
    """A file h5subfile cannot interpret (not HDF5, damaged layout record, ...)."""


class UnsafePathError(H5SubfileError, ValueError):
    """A recorded source path that would escape the master file's folder."""


class RankFailedError(H5SubfileError, RuntimeError):
    """An unexpected exception on some ranks, re-raised on every rank by a collective check."""


class RankIOError(H5SubfileError, OSError):
    """An operating-system error on some ranks (disk full, permissions...), re-raised everywhere."""
