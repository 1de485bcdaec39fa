"""Darshan logs read from disk (docs/PROFILING.md, *Reading Darshan logs*): :func:`read_log`
checks the file (a regular file, a Darshan header, not cut short), asks PyDarshan (the optional
``darshan`` package, imported only here and only when a log is read) for its data as plain
data, and maps it with :func:`~..profiler.darshan.from_darshan`.
"""

from __future__ import annotations

import os
import struct
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import CorruptFileError, H5SubfileError, MissingFileError
from ..profiler.darshan import from_darshan
from .regular import read_regular, require_regular

#: ``DARSHAN_MAGIC_NR``: the 64-bit number after the 8-byte version string that opens every
#: Darshan log (in the byte order of the machine that wrote it).
DARSHAN_MAGIC = 6567223
SUFFIX = ".darshan"
INSTALL = "pip install 'h5subfile[darshan]'"
DARSHAN_LOG = "Darshan log"


def has_darshan_header(path: str) -> bool:
    """Whether ``path`` starts as a Darshan log does: a version string, then the magic number
    in either byte order."""
    try:
        head = read_regular(path, DARSHAN_LOG, 16)
    except OSError:
        return False
    if len(head) < 16:
        return False
    number = head[8:16]
    return DARSHAN_MAGIC in (int.from_bytes(number, "little"), int.from_bytes(number, "big"))


def is_darshan_path(path: str) -> bool:
    """Whether ``h5subfile report`` should read ``path`` as a Darshan log: a ``.darshan`` name
    (or ``.darshan_partial``, the name of a log darshan-runtime has not finished), or any file
    that starts with a Darshan header."""
    name = os.path.basename(path)
    if name.endswith((SUFFIX, SUFFIX + "_partial")):
        return True
    return os.path.isfile(path) and has_darshan_header(path)


def read_log(path: str) -> dict[str, Any]:
    """The profile document of the Darshan log ``path``, read with PyDarshan. MissingFileError,
    CorruptFileError (not a Darshan log, or one PyDarshan cannot read) or H5SubfileError
    (PyDarshan not installed), each with a one-line message naming the file."""
    if not os.path.exists(path):
        raise MissingFileError(f"{path} does not exist")
    require_regular(path, DARSHAN_LOG)
    if not has_darshan_header(path):
        raise CorruptFileError(f"{path} is not a Darshan log (it does not start with one's header)")
    try:
        import darshan  # the optional extra: h5subfile works without it
    except ImportError:
        raise H5SubfileError(
            f"reading the Darshan log {path} needs PyDarshan, not installed: {INSTALL} "
            "(or pip install darshan)"
        ) from None
    with _c_stderr() as said:
        try:
            raw = _pydarshan_view(darshan, path)
            failed = None
        except (RuntimeError, ValueError, KeyError, OSError) as exc:
            failed = str(exc)
        # libdarshan-util says what it could not read on stderr and PyDarshan goes on with
        # what it had: any error line makes the log unreadable rather than silently partial
        told = [line for line in said().splitlines() if line.startswith("Error:")]
    if failed is not None or told:
        why = told[0].removeprefix("Error: ") if told else failed
        raise CorruptFileError(f"{path} is not a readable Darshan log: {why}")
    return from_darshan(raw, log=path)


def _cut_short(path: str, modules: dict[str, dict[str, Any]]) -> str | None:
    """Why the log is shorter than its header says, or None. libdarshan-util aborts the
    process on some truncated logs instead of failing, so they are refused before it reads
    them. A Darshan 3.x log is its header (version string, magic number, compression type and
    partial flag: 8 + 8 + 4 + 4 bytes, then the names' region as offset and length), the names'
    region, then the modules' regions one after the other, whose lengths PyDarshan reports:
    the file must be at least that long. Not checked when the names' offset is implausible
    (another header layout)."""
    head = read_regular(path, DARSHAN_LOG, 40)
    if len(head) < 40:
        return f"cut short: {len(head)} bytes, shorter than a header"
    order = "<" if int.from_bytes(head[8:16], "little") == DARSHAN_MAGIC else ">"
    offset, length = struct.unpack_from(order + "QQ", head, 24)
    if not 40 <= offset <= 1 << 16 or length >= 1 << 40:
        return None
    end = offset + length + sum(int(m["len"]) for m in modules.values())
    size = os.path.getsize(path)
    if size < end:
        return f"cut short: its header says {end} bytes, the file has {size}"
    return None


@contextmanager
def _c_stderr() -> Iterator[Any]:
    """Collect what libdarshan-util prints on the process's standard error (file descriptor 2)
    while the log is read, so that a failure is one line; yields a function returning it."""
    sys.stderr.flush()  # what Python wrote before stays where it was going
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:

        def said() -> str:
            sink.seek(0)
            return sink.read().decode("utf-8", "replace")

        os.dup2(sink.fileno(), 2)
        try:
            yield said
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _pydarshan_view(darshan: Any, path: str) -> dict[str, Any]:
    """The parts of the log :func:`from_darshan` maps, as plain data in PyDarshan's shapes:
    ``job`` (``report.metadata['job']``), ``exe``, ``mounts`` ((mount point, fs type) pairs),
    ``modules`` (name: {'partial_flag': ...}), ``names`` (record id: file name), ``posix``
    (records: id, rank, counters and fcounters by name) and ``dxt`` (DXT_POSIX records with
    their write and read segments; None when the log has no DXT_POSIX)."""
    with darshan.DarshanReport(path, read_all=False) as report:
        modules = {name: dict(info) for name, info in report.modules.items()}
        short = _cut_short(path, modules)
        if short:
            raise ValueError(short)
        posix: list[dict[str, Any]] = []
        dxt: list[dict[str, Any]] | None = None
        if "POSIX" in modules:
            report.mod_read_all_records("POSIX", dtype="dict", warnings=False)
            posix = [_plain_record(rec) for rec in report.records["POSIX"].to_numpy()]
        if "DXT_POSIX" in modules:
            report.mod_read_all_dxt_records("DXT_POSIX", warnings=False)
            dxt = list(report.records["DXT_POSIX"].to_numpy())
        if not report.name_records_read:
            report.read_name_records()
        return {
            "job": dict(report.metadata["job"]),
            "exe": report.metadata.get("exe", ""),
            "mounts": [tuple(m) for m in report.mounts],
            "modules": modules,
            "names": dict(report.name_records),
            "posix": posix,
            "dxt": dxt,
        }


def _plain_record(rec: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": int(rec["id"]),
        "rank": int(rec["rank"]),
        "counters": {name: int(v) for name, v in rec["counters"].items()},
        "fcounters": {name: float(v) for name, v in rec["fcounters"].items()},
    }
