"""``Dataset``: a dataset of an open file, like ``h5py.Dataset``.

Reads (``d[sel]``, :meth:`Dataset.read`, :meth:`Dataset.read_direct`, ``np.asarray(d)``) are
independent; :meth:`Dataset.write` is collective (this rank's block), ``d[sel] = x`` independent,
or collective inside ``with d.collective:``. Also :meth:`Dataset.write_direct`,
:meth:`Dataset.read_partition`, :meth:`Dataset.read_collective`, :meth:`Dataset.resize`, and
h5py's properties (``shape``, ``dtype``, ``maxshape``, ``fillvalue``, ``chunks``...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine import dims, transfer
from ..engine import read as reads
from ..engine import resize as resizing
from ..engine.messages import WHOLE_BLOCK, WriteRequest
from ..engine.session import Session
from ..io.filters import FilterSpec
from ..layout.blocks import Block
from ..layout.catalog import NodeInfo
from ..layout.names import names_master
from ..layout.record import DatasetLayout
from .dims import DimensionManager, is_scale, shape_of
from .h5py_surface import ReadView, as_str, fields_of
from .node import Node


class Dataset(Node):
    """A dataset, like ``h5py.Dataset``. Reading is independent; writing is collective."""

    _h5py_kind = "Dataset"

    def _info(self) -> NodeInfo:
        self._session.require_open()
        return self._session.node(self._path)

    @property
    def dims(self) -> DimensionManager:
        """The dataset's dimensions and their scales (h5py's ``DimensionManager``)."""
        return DimensionManager(self)

    def make_scale(self, name: str | bytes = "") -> None:
        """Collective: make this dataset a dimension scale named ``name``."""
        dims.make_scale(self._session, self._path, name, shape_of(self.file))

    @property
    def is_scale(self) -> bool:
        """Whether this dataset is a dimension scale."""
        return is_scale(self.attrs)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._info().shape

    @property
    def dtype(self) -> np.dtype:
        dtype = self._info().dtype
        assert dtype is not None
        return dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def layout(self) -> DatasetLayout | None:
        """Where the data is stored (extents: file, dataset, box, byte offset), if read directly."""
        return self._info().layout

    @property
    def storage(self) -> str:
        """A short description of the storage (virtual over subfiles, contiguous, ...)."""
        return self._info().storage

    @property
    def problem(self) -> str | None:
        """Why reading this dataset would fail (missing subfile, unfinished session...), or None."""
        problem = self._info().problem
        return None if problem is None else problem[1]

    @property
    def block(self) -> Block | None:
        """This rank's block, for a dataset created in the current write session."""
        writing = self._session.writing
        target = None if writing is None else writing.targets.get(self._path)
        return None if target is None else target.block

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a scalar dataset")
        return self.shape[0]

    def __repr__(self) -> str:
        if self._session.closed:
            return f"<Closed h5subfile.Dataset {self._path!r}>"
        return f"<h5subfile.Dataset {self._path!r}: shape {self.shape}, type {self.dtype.str!r}>"

    @property
    def chunks(self) -> tuple[int, ...] | None:
        """The chunk shape (each extent's chunks are this, clipped to the extent), or None."""
        info = self._info()
        if info.layout is not None and info.layout.chunks:
            return info.layout.chunks
        if info.via_h5py and self.shape:
            chunks: tuple[int, ...] | None = self._session.reader.h5py_dataset(self._path).chunks
            return chunks
        return None

    @property
    def compression(self) -> str | None:
        """The compression filter's name (``"gzip"``, ``"zstd"``...), or None."""
        info = self._info()
        if info.layout is not None and info.layout.chunks:
            return FilterSpec.from_dict(info.layout.filters).name
        if info.via_h5py and self.shape:
            name: str | None = self._session.reader.h5py_dataset(self._path).compression
            return name
        return None

    def _h5py_or(self, name: str, ours: Any) -> Any:
        """h5py's property ``name`` for a dataset read through h5py (a file other programs
        wrote), else ``ours``."""
        info = self._info()
        if info.via_h5py and self.shape:
            return getattr(self._session.reader.h5py_dataset(self._path), name)
        return ours

    @property
    def compression_opts(self) -> Any:
        """The compression's options, as h5py gives them: gzip's level, None for lzf or no
        compression, the filter's options (HDF5's cd_values) for another filter."""
        spec = self.filters
        ours = spec.options[0] if spec.name == "gzip" else spec.options or None
        return self._h5py_or("compression_opts", None if spec.name == "lzf" else ours)

    @property
    def shuffle(self) -> bool:
        """Whether the shuffle filter is applied (h5py's ``shuffle``)."""
        return bool(self._h5py_or("shuffle", self.filters.shuffle))

    @property
    def fletcher32(self) -> bool:
        """Whether the Fletcher-32 checksum filter is applied (h5py's ``fletcher32``)."""
        return bool(self._h5py_or("fletcher32", self.filters.fletcher32))

    @property
    def scaleoffset(self) -> int | None:
        """None: h5subfile applies no scale-offset filter (h5py's ``scaleoffset``)."""
        found: int | None = self._h5py_or("scaleoffset", None)
        return found

    @property
    def external(self) -> Any:
        """None: h5subfile stores no dataset in external raw files (h5py's ``external``)."""
        return self._h5py_or("external", None)

    @property
    def is_virtual(self) -> bool:
        """Whether HDF5 sees this dataset as a virtual dataset: for other programs, one stored
        in subfiles (or grown by ``resize``) is the master's virtual dataset over them."""
        info = self._info()
        if info.via_h5py and self.shape:
            return bool(self._session.reader.h5py_dataset(self._path).is_virtual)
        layout = info.layout
        return layout is not None and any(not names_master(e.file) for e in layout.extents)

    def iter_chunks(self, sel: Any = None) -> Any:
        """h5py's ``iter_chunks``: for each chunk the selection (``sel``, slices; None: the
        whole dataset) meets, the slices of their intersection (h5py's own iterator, over
        :attr:`chunks`; TypeError for a dataset that is not chunked)."""
        from h5py._hl.dataset import ChunkIterator

        return ChunkIterator(self, sel)

    def flush(self) -> None:
        """Collective: h5py's ``Dataset.flush()`` (collective with the ``mpio`` driver): the
        file's :meth:`~h5subfile.File.flush`, which shares every rank's writes."""
        self.file.flush()

    def astype(self, dtype: Any) -> ReadView:
        """``d.astype(dtype)[sel]``: what is read, converted to ``dtype`` (h5py's)."""
        wanted = np.dtype(dtype)
        return ReadView(self, lambda value: np.asarray(value).astype(wanted)[()])

    def asstr(self, encoding: str | None = None, errors: str = "strict") -> ReadView:
        """``d.asstr()[sel]``: byte strings read as ``str`` (h5py's; UTF-8 by default)."""
        if self.dtype.kind != "S":
            raise TypeError("dset.asstr() can only be used on datasets with an HDF5 string type")
        return ReadView(self, as_str(encoding, errors))

    def fields(self, names: str | list[str]) -> ReadView:
        """``d.fields(name)[sel]`` (or a list of names): fields of a compound dataset, read
        alone (h5py's)."""
        return ReadView(self, fields_of(self.dtype, names))

    @property
    def filters(self) -> FilterSpec:
        """Every filter of a dataset written by h5subfile (name, HDF5 id, options, shuffle...)."""
        layout = self._info().layout
        return FilterSpec.from_dict(layout.filters if layout is not None else None)

    @property
    def collective(self) -> _Collective:
        """``with dset.collective: dset[sel] = data`` / ``x = dset[sel]``: the transfers inside
        are collective (as in h5py's mpio driver): every rank calls them, each with its own
        selection, and the plan's aggregators (two-phase I/O) serve them when it has any."""
        return _Collective(self._session)

    # writing -----------------------------------------------------------------------------------
    @property
    def maxshape(self) -> tuple[int | None, ...]:
        """The largest shape :meth:`resize` may give (None: unlimited), as in h5py."""
        info = self._info()
        if info.layout is not None and info.layout.maxshape:
            return tuple(None if n < 0 else n for n in info.layout.maxshape)
        if info.via_h5py:
            found: tuple[int | None, ...] = self._session.reader.h5py_dataset(self._path).maxshape
            return found
        return info.shape

    @property
    def fillvalue(self) -> Any:
        """What elements never written read as (zero unless ``fillvalue=`` was given)."""
        info = self._info()
        assert info.dtype is not None
        if info.fill is not None:
            return np.frombuffer(info.fill, dtype=info.dtype)[0]
        if info.via_h5py:
            return self._session.reader.h5py_dataset(self._path).fillvalue
        return np.zeros((), dtype=info.dtype)[()]

    # writing -----------------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        """Collective: write this rank's block (ranks with an empty block pass None or nothing).
        A scalar dataset: rank 0's value is written."""
        transfer.put(self._session, [WriteRequest(self._path, data, WHOLE_BLOCK)])

    def __setitem__(self, selection: Any, data: Any) -> None:
        """Write a selection: ``dset[lo:hi, ...] = data``, independently (as h5py's mpio
        driver does outside ``with dset.collective:``, where it is collective instead).

        A dataset created without declared blocks takes any selection h5py writes (integers,
        slices with steps, ``...``, one increasing index list) from any rank, any number of
        times: what the ranks write is where the dataset's data is (two ranks writing the
        same element is an OverlapError at the next flush or close). A dataset whose ranks
        declared blocks takes boxes (integers and step-1 slices) inside this rank's block,
        in any order, of any size, e.g. as a simulation produces them.
        """
        request = WriteRequest(self._path, data, selection)
        if self._session.collective_depth > 0:
            transfer.put(self._session, [request])
        else:
            transfer.put_independent(self._session, request)

    def write_direct(self, source: Any, source_sel: Any = None, dest_sel: Any = None) -> None:
        """h5py's ``write_direct``: ``self[dest_sel] = source[source_sel]`` (independent, or
        collective inside ``with dset.collective:``)."""
        array = np.asarray(source)
        part = array if source_sel is None else array[source_sel]
        self[() if dest_sel is None else dest_sel] = part

    def resize(self, size: int | Sequence[int], axis: int | None = None) -> None:
        """Collective: a new shape (``size``), or a new length of ``axis``, within
        ``maxshape`` (h5py's ``resize``), for a dataset created in this write session with a
        ``maxshape``. Growing makes room that reads as the fill value until written;
        shrinking drops what lies beyond."""
        self._session.require_writable("resize")
        resizing.resize(self._session, self._path, size, axis)

    # reading -----------------------------------------------------------------------------------
    def __getitem__(self, selection: Any) -> Any:
        if self._session.collective_depth > 0:
            return self.read_collective(selection)
        return self.read(selection)

    def read(self, selection: Any = (), verify: bool | None = None) -> Any:
        """Read a selection (numpy/h5py style) on this rank only; no communication.

        ``verify`` (default: the file's ``verify``) checks the checksum of every stored piece
        the selection touches, reading each piece whole (ChecksumError names the dataset, the
        file, the byte offset and length of a piece that changed). Without it, a subfile's
        identity and size are still checked, but flipped data bytes go unnoticed.
        """
        self._session.require_open()
        return reads.read(self._session, self._path, selection, verify)

    def read_direct(self, dest: np.ndarray, source_sel: Any = None, dest_sel: Any = None) -> None:
        """Read ``source_sel`` straight into the array ``dest`` (h5py's ``read_direct``), at
        ``dest_sel`` of it when given.

        For a box selection into a whole C-contiguous ``dest`` of the dataset's dtype the bytes
        land in ``dest`` without an intermediate array.
        """
        self._session.require_open()
        selection = () if source_sel is None else source_sel
        if dest_sel is not None:
            dest[dest_sel] = self.read(selection)
            return
        reads.read_into(self._session, self._path, dest, selection)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The whole dataset as a numpy array (``np.asarray(dset)``)."""
        data = np.asarray(self.read(()))
        return data if dtype is None else data.astype(dtype)

    def len(self) -> int:
        """The length of axis 0 (h5py's ``Dataset.len()``)."""
        return len(self)

    def read_partition(self) -> np.ndarray:
        """This rank's share along axis 0 (BD-CATS): rank p of P reads
        ``[p*N//P, (p+1)*N//P)``, the last rank also the remainder. Call it on every rank: it
        is collective when the plan has aggregators (two-phase reads) or when the dataset has
        more extents than rank 0 broadcasts at open (each rank is then sent the extents of its
        share); otherwise every rank reads its share itself."""
        self._session.require_open()
        return reads.read_partition(self._session, self._path)

    def read_collective(self, selection: Any = ()) -> Any:
        """Collective read: every rank calls it with its own selection.

        With the plan's ``aggregators`` (``File(path, "r", aggregators=...)``), a few ranks
        per file read large contiguous pieces (at most ``buffer_size`` bytes each) and send
        every rank its bytes (two-phase I/O); otherwise each rank reads its own bytes.
        """
        self._session.require_open()
        return reads.read_collective(self._session, self._path, selection)


class _Collective:
    """The context of ``with dset.collective:`` (nestable; per open file)."""

    def __init__(self, session: Session):
        self._session = session

    def __enter__(self) -> None:
        self._session.collective_depth += 1

    def __exit__(self, *exc: Any) -> None:
        self._session.collective_depth -= 1
