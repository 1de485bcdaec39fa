"""Integrity of stored data (docs/FORMAT.md): each subfile's identity, and piece checksums.

- **Identity.** Every subfile holds a small dataset, :data:`IDENTITY_DATASET`, of
  :data:`IDENTITY_BYTES` bytes: ``h5subfile <session uuid> <subfile name>``, NUL-padded. The
  master records its byte offset and the subfile's size, so a reader checks a subfile with one
  ``fstat`` and one positioned read: a subfile of another run, two swapped subfiles or a
  same-size overwrite are told apart from the right one.
- **Checksums.** Each stored piece (a rank's block in an extent, or a chunk) has the
  :data:`ALGORITHM` checksum of its bytes as stored: the block's C-order bytes, or the chunk's
  filtered bytes. 64 bits: a random change goes unnoticed with probability 2**-64.

Pure: hashing a buffer is computation, not I/O.

- **Hashers a write feeds.** :class:`FedHash` is a hasher the write feeds as its bytes go out;
  :class:`BlockStream` one for a block written piecewise in C order, hashed as written;
  :class:`FedSum` a whole block's hasher, read at close. :class:`PieceSum` is a stored piece's
  checksum, :class:`SubfileInfo` a subfile's recorded size and identity offset.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass
from typing import Any

import numpy as np
import xxhash

from .blocks import Block
from .hyperslab import Slab
from .runs import c_order_run

#: The checksum algorithm, as recorded in the layout record (``"checksum"``).
ALGORITHM = "xxh3_64"
#: The name of the identity dataset in every subfile (a reserved name).
IDENTITY_DATASET = "h5subfile.identity"
#: The identity's size in bytes (fixed, so it is read with one positioned read).
IDENTITY_BYTES = 128
_MAGIC = "h5subfile"


def checksum(data: Any) -> str:
    """The :data:`ALGORITHM` checksum of a buffer (bytes, memoryview, C-contiguous array), as
    16 hex digits. Releases the GIL while hashing."""
    return xxhash.xxh3_64_hexdigest(data)


def new_hasher() -> Any:
    """An incremental :data:`ALGORITHM` hasher (``update(buffer)``, ``hexdigest()``): the same
    value as :func:`checksum` of the bytes fed to it."""
    return xxhash.xxh3_64()


class FedHash:
    """A hasher the write of one block feeds as it writes (``update``), counting the bytes it
    was given: a block is recorded with this checksum only if it was fed the whole block.
    ``changed_early``: written behind from the caller's arrays (``async_zero_copy``), the
    sample taken at the call no longer matched once the bytes were written: the caller
    changed them too early, and the block records :func:`disowned` of this checksum."""

    __slots__ = ("hasher", "nbytes", "changed_early")

    def __init__(self) -> None:
        self.hasher = new_hasher()
        self.nbytes = 0
        self.changed_early = False

    def update(self, data: memoryview | np.ndarray) -> None:
        """Hash the next bytes (a memoryview, or a C-contiguous array's buffer)."""
        self.hasher.update(data)
        self.nbytes += data.nbytes


def disowned(value: str) -> str:
    """The checksum recorded for bytes the caller changed before they were written (zero
    copy's contract broken): ``value`` (the checksum of the bytes stored) with every bit
    flipped, which no reader's check of the stored bytes can match, so that ``verify`` and
    checked reads report the block (docs/FORMAT.md, *Integrity*)."""
    return format(int(value, 16) ^ ((1 << 4 * len(value)) - 1), f"0{len(value)}x")


class BlockStream(FedHash):
    """This rank's block of one dataset written piecewise: fed each piece that starts where
    the last one ended in the block's C order. ``claimed``: the bytes of the pieces taken so
    far, from the block's start; ``nbytes``: those fed (by the write, possibly later, in a
    write-behind thread). ``broken`` once a piece came out of that order or rewrote bytes:
    then the block is hashed from the file at close. ``changed``: writing behind without a
    copy, the checksum of the bytes the caller passed before the stream broke, when the file
    then held others (the caller changed its arrays too early): recorded instead, so that
    ``verify`` reports the block."""

    __slots__ = ("total", "claimed", "broken", "changed")

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total
        self.claimed = 0
        self.broken = False
        self.changed: str | None = None

    def continues(self, block: Block, box: Block, itemsize: int) -> bool:
        """Whether writing ``box`` (inside ``block``) starts where the stream stands."""
        if self.broken:
            return False
        run = c_order_run(block, box)
        return run is not None and run[0] * itemsize == self.claimed

    @property
    def complete(self) -> bool:
        """Whether every byte of the block was fed, in order (once the writes are done)."""
        return not self.broken and self.nbytes == self.claimed == self.total


@dataclass(frozen=True)
class FedSum:
    """A whole block's checksum, fed as its bytes are written (by the caller, or by the
    write-behind thread from its copy): known once the writes are done, read at close. A
    hasher not fed the whole block (its write failed) makes the block hashed from the file."""

    count: tuple[int, ...]
    hasher: FedHash
    nbytes: int


def identity(session_uuid: str, relpath: str) -> bytes:
    """The identity bytes of the subfile ``relpath`` (as recorded) of the session
    ``session_uuid``: only its name is used, so the master and its folder can be moved."""
    text = f"{_MAGIC} {session_uuid} {posixpath.basename(relpath)}".encode()
    if len(text) > IDENTITY_BYTES:
        raise ValueError(f"subfile name {relpath!r} is too long for its identity")
    return text.ljust(IDENTITY_BYTES, b"\0")


def describe_identity(found: bytes) -> str:
    """What an identity read from a subfile says, for messages (which run, which subfile)."""
    parts = found.rstrip(b"\0").split(b" ")
    if len(parts) == 3 and parts[0] == _MAGIC.encode():
        try:
            uuid, name = parts[1].decode("ascii"), parts[2].decode("ascii")
        except UnicodeDecodeError:
            return "no readable identity (the bytes were overwritten)"
        return f"the identity of subfile {name} of write session {uuid}"
    return "no readable identity (the bytes were overwritten)"


@dataclass(frozen=True)
class SubfileInfo:
    """What the master records of one subfile: its size and where its identity is."""

    bytes: int
    identity_offset: int

    def to_dict(self) -> dict[str, int]:
        return {"bytes": self.bytes, "identity_offset": self.identity_offset}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SubfileInfo:
        return cls(int(data["bytes"]), int(data["identity_offset"]))


@dataclass(frozen=True)
class PieceSum:
    """The checksum of one stored piece: the box ``[start, start + shape)`` of the dataset (a
    rank's block, or a chunk: then the checksum is of the chunk's stored, filtered bytes).

    A piece of a dataset whose layout was learned from the writes (format 4) is a regular
    hyperslab: blocks of ``shape`` at ``start + index * stride`` for every index of the grid
    ``count``, written by ``rank``; its checksum is of its blocks' bytes, the blocks in C order
    of their index, each block in C order (layout/hyperslab.py). ``stride`` and ``count`` are
    empty for a box, ``rank`` -1 when not recorded."""

    start: tuple[int, ...]
    shape: tuple[int, ...]
    checksum: str
    stride: tuple[int, ...] = ()
    count: tuple[int, ...] = ()
    rank: int = -1

    def __reduce__(self) -> tuple[type[PieceSum], tuple[Any, ...]]:
        """Pickled as a call with its fields (compact: a rank's layout may list many)."""
        return type(self), (
            self.start,
            self.shape,
            self.checksum,
            self.stride,
            self.count,
            self.rank,
        )

    @property
    def slab(self) -> Slab:
        """The piece's elements as a slab (a box when ``count`` is empty)."""
        if not self.count:
            return Slab.of_box(Block(self.start, self.shape))
        return Slab.made(self.start, self.stride, self.count, self.shape)

    @property
    def elements(self) -> int:
        return math.prod(self.shape) * math.prod(self.count)

    def to_dict(self) -> dict[str, Any]:
        """The piece as the record stores it (``stride``, ``count``, ``rank`` only when set)."""
        found: dict[str, Any] = {
            "start": self.start,
            "shape": self.shape,
            "checksum": self.checksum,
        }
        if self.count:
            found["stride"], found["count"] = self.stride, self.count
        if self.rank >= 0:
            found["rank"] = self.rank
        return found

    @classmethod
    def of_slab(cls, slab: Slab, checksum: str, rank: int) -> PieceSum:
        """The piece a rank wrote as ``slab`` (a box keeps ``stride`` and ``count`` empty)."""
        if slab.is_box:
            return cls(slab.start, slab.block, checksum, (), (), rank)
        return cls(slab.start, slab.block, checksum, slab.stride, slab.count, rank)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PieceSum:
        return cls(
            tuple(int(v) for v in data["start"]),
            tuple(int(v) for v in data["shape"]),
            str(data["checksum"]),
            tuple(int(v) for v in data.get("stride", ())),
            tuple(int(v) for v in data.get("count", ())),
            int(data.get("rank", -1)),
        )
