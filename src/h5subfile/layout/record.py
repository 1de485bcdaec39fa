"""The layout record stored in the master (described in docs/FORMAT.md).

Root attribute ``h5subfile`` (JSON): format number and the list of write sessions (ranks, plan,
grouping, subfiles, version, start and close times). Dataset attribute ``h5subfile.layout`` (JSON):
the session that wrote it, whether it was completed, and its extents: which box of the dataset is
stored in which file (relative to the master; ``""`` is the master itself), under which dataset
name, at which byte offset.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import pickle
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from ..errors import CorruptFileError
from .blocks import Block
from .integrity import PieceSum

FORMAT_VERSION = 6  # 2: chunked and compressed extents; 3: session ids, dtypes, integrity;
#: 4: layouts learned from the writes (hyperslab pieces with their ranks), maxshape; 5: learned
#: layouts grown by later sessions (their extents and pieces name those sessions' ranks); 6: a
#: learned layout's pieces of one source that make one regular hyperslab mapped as one
#: The format a file takes once a later session grows one of its datasets (engine/resize.py).
GROWN_FORMAT = 5
#: The format a file takes once a virtual dataset maps several pieces as one (io/master.py).
MERGED_FORMAT = 6
#: The format a new file starts with: raised only by what needs more, so that a file using
#: nothing newer stays readable by older versions.
NEW_FILE_FORMAT = GROWN_FORMAT
ROOT_ATTR = "h5subfile"
LAYOUT_ATTR = "h5subfile.layout"
RESERVED_PREFIX = "h5subfile"


@dataclass(frozen=True)
class StoredExtent:
    """A box of a dataset stored contiguously (C order) at ``offset`` in ``file``/``dataset``."""

    file: str
    dataset: str
    start: tuple[int, ...]
    shape: tuple[int, ...]
    offset: int  # -1 for a chunked extent (its chunks are wherever HDF5 put them)
    ranks: tuple[int, ...] = ()
    chunks: tuple[int, ...] = ()  # the source dataset's chunk shape; () if contiguous
    pieces: tuple[PieceSum, ...] = ()  # checksums of the pieces stored here (format 3)

    @cached_property
    def block(self) -> Block:
        """The extent's box in dataset coordinates (made once: every read asks for it)."""
        return Block(self.start, self.shape)

    def __reduce__(self) -> tuple[type[StoredExtent], tuple[Any, ...]]:
        """Pickled as a call with its fields: compact, and without what is cached on it."""
        return type(self), (
            self.file,
            self.dataset,
            self.start,
            self.shape,
            self.offset,
            self.ranks,
            self.chunks,
            self.pieces,
        )

    def changed(
        self, *, offset: int | None = None, pieces: tuple[PieceSum, ...] | None = None
    ) -> StoredExtent:
        """This extent stored at ``offset`` or with the checksums of its ``pieces``: made
        directly, in half the time of ``dataclasses.replace`` (rank 0 makes one for every
        rank's extent of every dataset it publishes, and again at close)."""
        return StoredExtent(
            self.file,
            self.dataset,
            self.start,
            self.shape,
            self.offset if offset is None else offset,
            self.ranks,
            self.chunks,
            self.pieces if pieces is None else pieces,
        )

    def nbytes(self, itemsize: int) -> int:
        return math.prod(self.shape) * itemsize


@dataclass(frozen=True)
class DatasetLayout:
    """The layout record of one dataset."""

    session: int
    extents: tuple[StoredExtent, ...]
    complete: bool = True
    chunks: tuple[int, ...] = ()  # the dataset's chunk shape (each extent's, clipped to it)
    chunks_aligned: bool = True  # no chunk straddles two ranks' blocks
    filters: dict[str, Any] = field(default_factory=dict)  # io.filters.FilterSpec.to_dict()
    dtype: str = ""  # the element type written (numpy's ``dtype.str``); "" before format 3
    checksum: str = ""  # the pieces' checksum algorithm (integrity.ALGORITHM); "" for none
    #: format 4: the layout was learned from the writes (no rank declared a block): each
    #: extent is a source that ranks wrote parts of, its pieces are what they wrote (each a
    #: VDS mapping, unless the extent is the master's own dataset); the rest reads as fill
    learned: bool = False
    #: format 4: the dataset's maximum shape, -1 for an unlimited axis; () when fixed
    maxshape: tuple[int, ...] = ()

    @property
    def mapped_by_pieces(self) -> bool:
        """Whether each piece is read from its own place (a learned layout in subfiles) rather
        than each extent whole."""
        return self.learned and any(e.file not in ("", ".") for e in self.extents)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data: ``dataclasses.asdict``'s result (keys in field order),
        built directly (``asdict`` copies every rank number and costs about a second per
        million ranks listed)."""
        return {
            "session": self.session,
            "extents": [
                {
                    "file": e.file,
                    "dataset": e.dataset,
                    "start": e.start,
                    "shape": e.shape,
                    "offset": e.offset,
                    "ranks": e.ranks,
                    "chunks": e.chunks,
                    "pieces": [p.to_dict() for p in e.pieces],
                }
                for e in self.extents
            ],
            "complete": self.complete,
            "chunks": self.chunks,
            "chunks_aligned": self.chunks_aligned,
            "filters": copy.deepcopy(self.filters) if self.filters else {},
            "dtype": self.dtype,
            "checksum": self.checksum,
            **({"learned": True} if self.learned else {}),
            **({"maxshape": self.maxshape} if self.maxshape else {}),
        }

    def to_json(self) -> str:
        """The record as stored: its canonical JSON (what the digest is of) with the digest
        added as the last key, so that it is encoded once (readers parse it: key order is
        not part of the format)."""
        canonical = canonical_json(self.to_dict())
        return f'{canonical[:-1]},"{DIGEST_KEY}":"{digest_of(canonical)}"}}'

    def __reduce__(self) -> tuple[type[DatasetLayout], tuple[Any, ...]]:
        """Pickled as a call with its fields: compact, and without what is cached on it."""
        return type(self), (
            self.session,
            self.extents,
            self.complete,
            self.chunks,
            self.chunks_aligned,
            self.filters,
            self.dtype,
            self.checksum,
            self.learned,
            self.maxshape,
        )

    def to_wire(self) -> bytes:
        """The record as bytes for sending to other ranks (rank 0 checked it; no digest): a
        rank that receives it pays nothing until it reads the dataset (:meth:`from_wire`).
        Pickled fields (:meth:`__reduce__`): half the bytes of its compact JSON, and parsed in
        half the time. Made once per record (a record sent to every rank is not serialised
        again each time)."""
        return self._wire

    @cached_property
    def _wire(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_wire(cls, data: bytes) -> DatasetLayout:
        """The record :meth:`to_wire` sent (from a rank of the same job: trusted, no checks)."""
        layout = pickle.loads(data)
        assert isinstance(layout, cls)
        return layout

    @classmethod
    def from_json(cls, text: str, where: str) -> DatasetLayout:
        """Parse a record strictly: numbers are JSON integers (not strings, floats or booleans),
        lists are lists; anything else raises :class:`CorruptFileError` naming ``where``."""
        try:
            data = _mapping(json.loads(text), "the record")
            extents = tuple(
                StoredExtent(
                    _text(e["file"], "file"),
                    _text(e["dataset"], "dataset"),
                    _ints(e["start"], "start"),
                    _ints(e["shape"], "shape"),
                    _int(e["offset"], "offset"),
                    _ints(e.get("ranks", []), "ranks"),
                    _ints(e.get("chunks", []), "chunks"),
                    tuple(
                        _piece(q)
                        for q in (
                            _mapping(q, "a piece") for q in _list(e.get("pieces", []), "pieces")
                        )
                    ),
                )
                for e in (_mapping(e, "an extent") for e in _list(data["extents"], "extents"))
            )
            return cls(
                _int(data["session"], "session"),
                extents,
                _flag(data.get("complete", True), "complete"),
                _ints(data.get("chunks", []), "chunks"),
                _flag(data.get("chunks_aligned", True), "chunks_aligned"),
                dict(_mapping(data.get("filters") or {}, "filters")),
                _text(data.get("dtype", ""), "dtype"),
                _text(data.get("checksum", ""), "checksum"),
                _flag(data.get("learned", False), "learned"),
                _ints(data.get("maxshape", []), "maxshape"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFileError(f"damaged layout record of {where}: {exc}") from None


def _piece(data: dict[str, Any]) -> PieceSum:
    """One piece of a record, strictly (format 4 adds ``stride``, ``count`` and ``rank``)."""
    stride, count = _ints(data.get("stride", []), "stride"), _ints(data.get("count", []), "count")
    if len(stride) != len(count):
        raise ValueError(f"a piece has stride {list(stride)} and count {list(count)}")
    return PieceSum(
        _ints(data["start"], "piece start"),
        _ints(data["shape"], "piece shape"),
        _text(data["checksum"], "checksum"),
        stride,
        count,
        _int(data.get("rank", -1), "rank"),
    )


#: Key of the record's digest: SHA-256 of the record's canonical JSON without it (format 3).
DIGEST_KEY = "digest"


def canonical_json(body: dict[str, Any]) -> str:
    """A record's canonical JSON: keys sorted, no spaces, ASCII."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest_of(canonical: str) -> str:
    """The digest of a record's canonical JSON: SHA-256, hex."""
    return hashlib.sha256(canonical.encode()).hexdigest()


def record_digest(data: dict[str, Any]) -> str:
    """The digest of a record (its canonical JSON, digest left out)."""
    return digest_of(canonical_json({k: v for k, v in data.items() if k != DIGEST_KEY}))


def _int(value: Any, what: str) -> int:
    if type(value) is not int:  # bool is an int subclass; "12" and 12.0 are not integers here
        raise TypeError(f"{what} must be an integer, got {value!r}")
    return value


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if type(value) is list and all(type(v) is int for v in value):  # the common case, fast
        return tuple(value)
    return tuple(_int(v, what) for v in _list(value, what))


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} must be a list, got {value!r}")
    return value


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be an object, got {value!r}")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {value!r}")
    return value


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be true or false, got {value!r}")
    return value


@dataclass
class Session:
    """One write session: from an open for writing to its close."""

    id: int
    mode: str
    ranks: int
    plan: dict[str, Any]
    grouping: str
    subfiles: list[str]
    version: str
    started: str
    closed: str | None = None
    commit: str = "replace"
    extra: dict[str, Any] = field(default_factory=dict)
    uuid: str = ""  # unique id of the session (32 hex digits); "" before format 3
    #: each subfile's size and identity offset (integrity.SubfileInfo.to_dict()), by subfile
    subfile_info: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class FileRecord:
    """The root record: format version and every write session."""

    sessions: list[Session] = field(default_factory=list)
    format: int = NEW_FILE_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str) -> FileRecord:
        try:
            data = json.loads(text)
            if int(data.get("format", 0)) > FORMAT_VERSION:
                raise CorruptFileError(
                    f"{where} was written with layout format {data['format']}; this h5subfile "
                    f"reads format {FORMAT_VERSION} or older: upgrade h5subfile"
                )
            sessions = [Session(**s) for s in data.get("sessions", [])]
            for session in sessions:
                session.subfile_info = _subfile_info(session.subfile_info)
            return cls(sessions, int(data.get("format", FORMAT_VERSION)))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFileError(f"damaged h5subfile record in {where}: {exc}") from None

    @property
    def open_sessions(self) -> list[Session]:
        return [s for s in self.sessions if s.closed is None]


def _subfile_info(value: Any) -> dict[str, dict[str, int]]:
    """A session's ``subfile_info``, checked: subfile -> {"bytes", "identity_offset"}."""
    return {
        _text(name, "subfile name"): {
            "bytes": _int(_mapping(info, "subfile info")["bytes"], "bytes"),
            "identity_offset": _int(info["identity_offset"], "identity_offset"),
        }
        for name, info in _mapping(value, "subfile_info").items()
    }


def session_sha(session: Session) -> str:
    """SHA-256 (hex) of one write session's entry of the root record (canonical JSON)."""
    return digest_of(canonical_json(asdict(session)))


def is_reserved(name: str) -> bool:
    """Attribute names h5subfile keeps for itself (hidden from ``.attrs``)."""
    return name.startswith(RESERVED_PREFIX)


def extents_files(extents: Sequence[StoredExtent]) -> list[str]:
    return sorted({e.file for e in extents})
