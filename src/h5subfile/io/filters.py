"""Compression filters: names and hdf5plugin objects -> one recordable spec, and the compressor
that runs HDF5's own filter pipeline on one chunk in memory.

A chunk is compressed by writing it into a one-chunk dataset of an in-memory HDF5 file (the
``core`` driver, no backing store) with the same dtype, chunk shape and filters as the dataset in
the subfile, and reading the filtered bytes back with ``read_direct_chunk``. The bytes are then
exactly what HDF5 would have stored (including the parameters filters compute for themselves,
such as Blosc's type size), so ``write_direct_chunk`` puts them into the subfile unchanged and any
HDF5 reader with the filter (``import hdf5plugin``) decodes them.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

import h5py
import numpy as np

from ..errors import PlanError

#: Filters built into HDF5 or h5py, by name.
BUILTIN = ("gzip", "lzf")
#: Filters from hdf5plugin, by name: (class name, keyword of the level, or None).
PLUGINS: dict[str, tuple[str, str | None]] = {
    "zstd": ("Zstd", "clevel"),
    "lz4": ("LZ4", None),
    "blosc": ("Blosc", "clevel"),
    "blosc2": ("Blosc2", "clevel"),
    "bitshuffle": ("Bitshuffle", None),
}
NAMES = BUILTIN + tuple(PLUGINS)


@dataclass(frozen=True)
class FilterSpec:
    """The filters of one dataset, as recorded in the layout record.

    ``name`` is a filter name (:data:`NAMES`), ``"filter-<id>"`` for another registered filter,
    or None (no compression: chunked only, perhaps with shuffle/fletcher32). ``filter_id`` and
    ``options`` (HDF5's cd_values, or gzip's level) say exactly what HDF5 applies.
    """

    name: str | None = None
    filter_id: int | None = None
    options: tuple[int, ...] = ()
    shuffle: bool = False
    fletcher32: bool = False

    @property
    def is_empty(self) -> bool:
        return self.name is None and not self.shuffle and not self.fletcher32

    def h5py_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``h5py.Group.create_dataset`` applying these filters."""
        kwargs: dict[str, Any] = {"shuffle": self.shuffle, "fletcher32": self.fletcher32}
        if self.name == "gzip":
            kwargs.update(compression="gzip", compression_opts=self.options[0])
        elif self.name == "lzf":
            kwargs.update(compression="lzf")
        elif self.name is not None:
            load_plugins()
            kwargs.update(compression=self.filter_id, compression_opts=self.options)
        return kwargs

    def describe(self) -> str:
        parts = ["shuffle"] if self.shuffle else []
        if self.name == "gzip":
            parts.append(f"gzip level {self.options[0]}")
        elif self.name is not None:
            parts.append(self.name)
        if self.fletcher32:
            parts.append("fletcher32")
        return "+".join(parts) or "no filters"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FilterSpec:
        if not data:
            return cls()
        return cls(
            data.get("name"),
            None if data.get("filter_id") is None else int(data["filter_id"]),
            tuple(int(v) for v in data.get("options", ())),
            bool(data.get("shuffle", False)),
            bool(data.get("fletcher32", False)),
        )


def load_plugins() -> Any:
    """Import hdf5plugin (registers its filters with the HDF5 h5py uses)."""
    try:
        import hdf5plugin
    except ImportError:  # pragma: no cover - a declared dependency
        raise PlanError(
            "the zstd, lz4, blosc, blosc2 and bitshuffle filters need hdf5plugin: "
            "pip install hdf5plugin"
        ) from None
    return hdf5plugin


def _plugin_spec(name: str, filter_obj: Any) -> tuple[str, int, tuple[int, ...]]:
    return name, int(filter_obj.filter_id), tuple(int(v) for v in filter_obj.filter_options)


def resolve_filters(
    compression: Any = None,
    compression_opts: Any = None,
    shuffle: bool | None = None,
    fletcher32: bool | None = None,
) -> FilterSpec:
    """Check ``create_dataset``'s filter arguments (as h5py takes them) and resolve them.

    ``compression`` is a name of :data:`NAMES`, ``"name:level"``, an hdf5plugin filter object
    (``hdf5plugin.Zstd(clevel=5)``), an HDF5 filter id with ``compression_opts`` as its
    cd_values, or None/False/"none". ``compression_opts`` is gzip's level (0-9), the level of
    zstd/blosc/blosc2, or a dict of the hdf5plugin class's keyword arguments.
    """
    shuffle, fletcher32 = bool(shuffle), bool(fletcher32)
    if (
        compression is None
        or compression is False
        or (isinstance(compression, str) and compression.strip().lower() in ("", "none", "off"))
    ):
        if compression_opts is not None:
            raise PlanError(f"compression_opts={compression_opts!r} given without a compression")
        return FilterSpec(None, None, (), shuffle, fletcher32)
    if isinstance(compression, h5py.filters.FilterRefBase):  # hdf5plugin.Zstd(...) and friends
        return _from_filter_object(compression, compression_opts, shuffle, fletcher32)
    if isinstance(compression, (int, np.integer)) and not isinstance(compression, bool):
        return _from_filter_id(int(compression), compression_opts, shuffle, fletcher32)
    if not isinstance(compression, str):
        raise PlanError(
            f"compression={compression!r}: expected a name ({', '.join(NAMES)}), "
            "an hdf5plugin filter object or an HDF5 filter id"
        )
    name, _, level_text = compression.strip().lower().partition(":")
    if level_text:
        if compression_opts is not None:
            raise PlanError(
                f"compression={compression!r} has a level; do not also pass compression_opts"
            )
        try:
            compression_opts = int(level_text)
        except ValueError:
            raise PlanError(f"compression={compression!r}: the level must be an integer") from None
    if name == "gzip":
        level = 4 if compression_opts is None else compression_opts
        if (
            isinstance(level, bool)
            or not isinstance(level, (int, np.integer))
            or not 0 <= level <= 9
        ):
            raise PlanError(f"gzip level {compression_opts!r}: expected an integer from 0 to 9")
        return FilterSpec("gzip", int(h5py.h5z.FILTER_DEFLATE), (int(level),), shuffle, fletcher32)
    if name == "lzf":
        if compression_opts is not None:
            raise PlanError(f"lzf takes no options (got compression_opts={compression_opts!r})")
        return FilterSpec("lzf", int(h5py.h5z.FILTER_LZF), (), shuffle, fletcher32)
    if name not in PLUGINS:
        raise PlanError(
            f"compression={compression!r}: unknown filter; known: {', '.join(NAMES)}, "
            "or an hdf5plugin filter object"
        )
    return _from_plugin_name(name, compression_opts, shuffle, fletcher32)


def _from_filter_object(
    compression: Any, compression_opts: Any, shuffle: bool, fletcher32: bool
) -> FilterSpec:
    """An hdf5plugin (or h5py) filter object: its options come from its constructor."""
    name = type(compression).__name__.lower()
    if compression_opts is not None:
        raise PlanError(
            f"compression_opts={compression_opts!r}: the options of a filter "
            f"object ({type(compression).__name__}) are given to its constructor"
        )
    _, filter_id, options = _plugin_spec(name, compression)
    shown = name if name in PLUGINS else f"filter-{filter_id}"
    return FilterSpec(shown, filter_id, options, shuffle, fletcher32)


def _from_filter_id(
    filter_id: int, compression_opts: Any, shuffle: bool, fletcher32: bool
) -> FilterSpec:
    """An HDF5 filter id, with ``compression_opts`` as its cd_values."""
    if filter_id == h5py.h5z.FILTER_DEFLATE:
        return resolve_filters("gzip", compression_opts, shuffle, fletcher32)
    if filter_id == h5py.h5z.FILTER_LZF:
        return resolve_filters("lzf", compression_opts, shuffle, fletcher32)
    load_plugins()
    if not h5py.h5z.filter_avail(filter_id):
        raise PlanError(f"compression={filter_id}: no HDF5 filter with this id is available")
    options = () if compression_opts is None else tuple(int(v) for v in compression_opts)
    return FilterSpec(f"filter-{filter_id}", filter_id, options, shuffle, fletcher32)


def _from_plugin_name(
    name: str, compression_opts: Any, shuffle: bool, fletcher32: bool
) -> FilterSpec:
    """A filter of :data:`PLUGINS` by name, with a level or a dict of its class's arguments."""
    class_name, level_keyword = PLUGINS[name]
    plugin_class = getattr(load_plugins(), class_name)
    if compression_opts is None:
        kwargs: dict[str, Any] = {}
    elif isinstance(compression_opts, dict):
        kwargs = dict(compression_opts)
    elif (
        level_keyword is not None
        and isinstance(compression_opts, (int, np.integer))
        and not isinstance(compression_opts, bool)
    ):
        kwargs = {level_keyword: int(compression_opts)}
    else:
        takes = f"a level ({level_keyword}) or " if level_keyword else ""
        raise PlanError(
            f"{name}: compression_opts={compression_opts!r}; expected {takes}a dict of "
            f"hdf5plugin.{class_name}'s keyword arguments"
        )
    try:
        filter_obj = plugin_class(**kwargs)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{name}: invalid options {kwargs}: {exc}") from None
    _, filter_id, options = _plugin_spec(name, filter_obj)
    return FilterSpec(name, filter_id, options, shuffle, fletcher32)


class ChunkCompressor:
    """Runs the filter pipeline of (dtype, chunk shape, filters) on whole chunks, in memory."""

    _names = itertools.count()

    def __init__(self, dtype: np.dtype, chunks: tuple[int, ...], spec: FilterSpec):
        self.chunks = chunks
        self._file = h5py.File(
            f"h5subfile-compressor-{next(self._names)}",
            "w",
            driver="core",
            backing_store=False,
            rdcc_nbytes=0,
        )
        self._dataset = self._file.create_dataset(
            "chunk", shape=chunks, dtype=dtype, chunks=chunks, **spec.h5py_kwargs()
        )
        self._origin = (0,) * len(chunks)

    def compress(self, chunk: np.ndarray) -> tuple[int, bytes]:
        """Filter one whole chunk; return HDF5's filter mask and the stored bytes."""
        self._dataset.write_direct(chunk)
        mask, data = self._dataset.id.read_direct_chunk(self._origin)
        return int(mask), data

    def close(self) -> None:
        self._file.close()


class Compressors:
    """One :class:`ChunkCompressor` per (dtype, chunk shape, filters), created on first use."""

    def __init__(self) -> None:
        self._made: dict[tuple[Any, ...], ChunkCompressor] = {}

    def get(self, dtype: np.dtype, chunks: tuple[int, ...], spec: FilterSpec) -> ChunkCompressor:
        key = (dtype, chunks, spec)
        compressor = self._made.get(key)
        if compressor is None:
            compressor = self._made[key] = ChunkCompressor(dtype, chunks, spec)
        return compressor

    def close(self) -> None:
        made, self._made = self._made, {}
        for compressor in made.values():
            compressor.close()
