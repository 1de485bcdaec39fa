"""Which file system a folder is on, and what that means for the tuner (docs/TUNING.md).

Detection: ``statfs(2)``'s ``f_type`` (through ctypes, Linux) named with the magic numbers
of Linux's ``include/uapi/linux/magic.h`` and of the out-of-tree file systems' own sources
(Lustre, GPFS, BeeGFS, ZFS), and the mount point and source from ``/proc/self/mountinfo``
(the longest mount point that holds the folder). :func:`probe` is the only function that asks
the system; everything else is pure, and tests pass fake probes.

Lustre is pure logic here: :func:`lustre_stripe_command` builds the ``lfs setstripe`` command
for the subfile folder, :func:`romio_hints` the MPI-IO hints, :func:`starting_points` the
plans the tuner tries first. Nothing here runs a command.

:func:`find_mount` (the longest mount point holding a path) is also what :mod:`.claim` reads a
mount's type and options from.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PlanError, as_error

#: statfs f_type -> name.
MAGIC: dict[int, str] = {
    0xEF53: "ext4",  # ext2, ext3 and ext4 share it
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x6969: "nfs",
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",
    0x19830326: "beegfs",
    0x01021994: "tmpfs",
    0x794C7630: "overlay",
    0x2FC12FC1: "zfs",
    0xF2F52010: "f2fs",
    0x858458F6: "ramfs",
    0x00C36400: "ceph",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x65735546: "fuse",
}

#: File systems on one machine's own storage (or memory).
LOCAL = ("ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "ramfs")
#: Parallel file systems, striped over many servers.
PARALLEL = ("lustre", "gpfs", "beegfs", "ceph")

MIB = 1 << 20
#: Lustre requires stripe sizes in multiples of 64 KiB.
LUSTRE_STRIPE_QUANTUM = 64 << 10


@dataclass(frozen=True)
class FileSystem:
    """A folder's file system: its name (``"unknown"`` for a magic not in :data:`MAGIC` nor
    named by mountinfo), statfs magic, mount point and mount source."""

    name: str
    magic: int
    mount: str
    source: str

    @property
    def local(self) -> bool:
        return local_type(self.name)

    @property
    def parallel(self) -> bool:
        return self.name in PARALLEL


def local_type(kind: str) -> bool:
    """Whether file systems of type ``kind`` (one of :data:`MAGIC`'s names, or the type
    /proc/self/mountinfo gives) keep their files on this machine's own storage or memory,
    where no other host reads them."""
    return kind in LOCAL or kind in ("ext2", "ext3")


Probe = Callable[[str | os.PathLike[str]], FileSystem]


def statfs_magic(folder: str | os.PathLike[str]) -> int:
    """``f_type`` of ``statfs(folder)`` (Linux; the first field of ``struct statfs``, a
    ``long`` on x86_64 and aarch64). Raises the hierarchy's error for the OS error."""
    libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: libc's statfs
    buffer = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on both
    if libc.statfs(os.fsencode(os.fspath(folder)), buffer) != 0:
        number = ctypes.get_errno()
        raise as_error(OSError(number, f"statfs: {os.strerror(number)}", os.fspath(folder)))
    return ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF


def unescape(text: str) -> str:
    """A mountinfo path with its octal escapes (``\\040`` for a space) decoded."""
    if "\\" not in text:
        return text
    out, index = [], 0
    while index < len(text):
        if text[index] == "\\" and text[index + 1 : index + 4].isdigit():
            out.append(chr(int(text[index + 1 : index + 4], 8)))
            index += 4
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo: mount point, file-system type, source, and the mount's
    and the super block's options together."""

    point: str
    kind: str
    source: str
    options: frozenset[str]


def read_mountinfo() -> list[str]:
    """The lines of Linux's /proc/self/mountinfo (none where it cannot be read)."""
    try:
        return Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []


def find_mount(path: str, lines: list[str]) -> Mount | None:
    """The mount holding the absolute ``path`` among ``lines`` of /proc/self/mountinfo: the
    longest mount point that is a prefix (the last such line when mounts are stacked); None
    if none matches."""
    best: Mount | None = None
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        point = unescape(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.point)):
            options = fields[5].split(",") if len(fields) > 5 else []
            options += tail[2].split(",") if len(tail) > 2 else []
            best = Mount(point, tail[0], unescape(tail[1]), frozenset(options))
    return best


def mount_of(path: str, mountinfo: str) -> tuple[str, str, str]:
    """(mount point, file-system type, source) of the mount holding the absolute ``path``,
    from the text of ``/proc/self/mountinfo`` (:func:`find_mount`). ``("/", "", "")`` if none
    matches."""
    found = find_mount(path, mountinfo.splitlines())
    return ("/", "", "") if found is None else (found.point, found.kind, found.source)


def probe(folder: str | os.PathLike[str]) -> FileSystem:
    """The file system of ``folder`` (which must exist), from statfs and
    ``/proc/self/mountinfo``."""
    path = os.path.realpath(folder)
    magic = statfs_magic(path)
    found = find_mount(path, read_mountinfo()) or Mount("/", "", "", frozenset())
    name = MAGIC.get(magic) or found.kind or "unknown"
    return FileSystem(name=name, magic=magic, mount=found.point, source=found.source)


def size_text(nbytes: int) -> str:
    """A byte count as ``lfs`` reads it: ``4M``, ``64K``, ``1G`` when exact, else bytes."""
    for suffix, scale in (("G", 1 << 30), ("M", MIB), ("K", 1 << 10)):
        if nbytes % scale == 0:
            return f"{nbytes // scale}{suffix}"
    return str(nbytes)


def lustre_stripe_command(folder: str | os.PathLike[str], count: int, size: int) -> list[str]:
    """``lfs setstripe -c COUNT -S SIZE FOLDER``: new files in ``folder`` (the subfile folder)
    striped over ``count`` OSTs (-1: all) in stripes of ``size`` bytes.

    Raises :class:`PlanError` for a count below -1 or 0, or a size that is not a positive
    multiple of 64 KiB (Lustre's rule).
    """
    if count == 0 or count < -1:
        raise PlanError(f"stripe count {count}: expected a positive count or -1 (every OST)")
    check_stripe_size(size)
    return ["lfs", "setstripe", "-c", str(count), "-S", size_text(size), os.fspath(folder)]


def check_stripe_size(size: int) -> None:
    """Raise :class:`PlanError` unless ``size`` is a positive multiple of 64 KiB (Lustre's
    rule for stripe sizes)."""
    if size <= 0 or size % LUSTRE_STRIPE_QUANTUM:
        raise PlanError(
            f"stripe size {size}: Lustre needs a positive multiple of 64 KiB (65536 bytes), "
            "e.g. 1m or 4m"
        )


def stripe_size_for(block_bytes: int) -> int:
    """The stripe size this project starts from for blocks of ``block_bytes`` per rank: the
    largest power of two at most an eighth of a block, between 1 MiB and 64 MiB (Lustre's
    1 MiB default for 32 MiB blocks would cut each block into 32 stripes; this gives 4 MiB)."""
    size = MIB
    while size * 2 <= block_bytes // 8 and size < 64 * MIB:
        size *= 2
    return size


def stripe_count_for(subfiles: int, osts: int | None = None) -> int:
    """One stripe per subfile, at most the OST count when known."""
    return max(1, min(subfiles, osts) if osts else subfiles)


def romio_hints(
    fs: FileSystem, subfiles: int, stripe_size: int, osts: int | None = None
) -> dict[str, str]:
    """MPI-IO hints for files MPI-IO creates on ``fs`` (``MPI_Info`` keys to values).

    - Lustre: ``striping_factor`` (one stripe per subfile, at most ``osts``) and
      ``striping_unit`` (``stripe_size``), which ROMIO applies when it creates the file;
      collective buffering on for writes (its aggregators write whole stripes) and data sieving
      off for writes (it locks and rewrites whole regions).
    - One local disk (ext4, xfs, btrfs, tmpfs, overlay, ...): collective buffering and data
      sieving off for writes and collective buffering off for reads: collective writes were
      slowest with collective buffering on and fastest with both off (docs/BENCHMARKS.md,
      *MPI-IO hints*).
    - NFS: data sieving off for writes (it needs byte-range locks, which NFS serves slowly).
    - Others: no hints (the MPI library's defaults).
    """
    if fs.name == "lustre":
        check_stripe_size(stripe_size)
        return {
            "striping_factor": str(stripe_count_for(subfiles, osts)),
            "striping_unit": str(stripe_size),
            "romio_cb_write": "enable",
            "romio_ds_write": "disable",
        }
    if fs.local:
        return {
            "romio_cb_write": "disable",
            "romio_ds_write": "disable",
            "romio_cb_read": "disable",
        }
    if fs.name == "nfs":
        return {"romio_ds_write": "disable"}
    return {}


#: Subfiling factors (ranks per subfile) the subfiling paper recommends on Lustre.
LUSTRE_FACTORS = (8, 16, 32, 64)


def starting_points(
    fs: FileSystem, ranks: int, block_bytes: int = 32 * MIB
) -> list[dict[str, Any]]:
    """The plans the tuner tries first on ``fs`` for ``ranks`` ranks, best guess first.

    On Lustre, the subfiling paper's recommendations: subfiling factors 8 to 64 (those below
    ``ranks``), datasets aligned to the stripe size (:func:`stripe_size_for` of
    ``block_bytes``, the bytes each rank writes per dataset). On one local disk, the defaults
    (one subfile per node, direct writes: aggregation was slower on one node,
    docs/BENCHMARKS.md, *Storage strategies*). Elsewhere, the defaults.
    """
    if fs.name == "lustre":
        stripe = stripe_size_for(block_bytes)
        factors = [k for k in LUSTRE_FACTORS if k < ranks] or [max(1, ranks // 2)]
        return [{"ranks_per_subfile": k, "alignment": stripe} for k in factors]
    return [{}]


def lustre_setup(
    fs: FileSystem, folder: str, subfiles: int, block_bytes: int, osts: int | None = None
) -> dict[str, Any]:
    """Everything a Lustre run sets before writing: the ``lfs setstripe`` command for the
    subfile folder, the MPI-IO hints and the alignment, from one stripe size; empty on other
    file systems."""
    if fs.name != "lustre":
        return {}
    size = stripe_size_for(block_bytes)
    count = stripe_count_for(subfiles, osts)
    return {
        "command": lustre_stripe_command(folder, count, size),
        "hints": romio_hints(fs, subfiles, size, osts),
        "alignment": size,
    }
