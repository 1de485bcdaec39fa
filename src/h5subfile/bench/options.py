"""Benchmark options, with IOR's flags and meanings.

:class:`BenchOptions` holds every flag; MPI-IO hints come from ``--hint k=v`` and, as in IOR,
from ``IOR_HINT__MPI__*`` variables; :data:`ROMIO9` is the CURIE study's nine
``romio_cb``/``romio_ds`` configurations (``hints = ["romio9"]`` in a sweep).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import PlanError

APIS = ("posix", "mpiio", "hdf5", "subfile", "phdf5")
HINT_ENV_PREFIX = "IOR_HINT__MPI__"


class BenchOptionError(PlanError):
    """Benchmark options that do not make sense together."""


@dataclass(frozen=True)
class BenchOptions:
    """One benchmark run (IOR's ``-a -b -t -s -i -w -r -e -C -F -c -o -k -W -R`` and more).

    Sizes are in bytes. Each rank writes ``segments`` x ``block`` bytes in ``transfer``-byte
    pieces; in a shared file segment s holds the ranks' blocks contiguously in rank order
    (offset ``s*block*P + r*block``); HDF5 APIs write one 1-D dataset per segment.
    """

    api: str = "posix"
    block: int = 2**20
    transfer: int = 256 * 2**10
    segments: int = 1
    iterations: int = 1
    write: bool = True
    read: bool = True
    fsync: bool = False
    reorder: bool = False
    file_per_proc: bool = False
    collective: bool = False
    test_file: str = "testFile"
    keep: bool = False
    check_write: bool = False
    check_read: bool = False
    hints: tuple[tuple[str, str], ...] = ()
    subfiles: int | str | None = None
    ranks_per_subfile: int | None = None
    coll_metadata: bool = False
    alignment: int = 0
    no_fill: bool = False
    #: subfile API: the other plan fields (aggregators, buffer_size, transfer_size, ...)
    plan: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise BenchOptionError(f"-a {self.api}: unknown API; choose from {', '.join(APIS)}")
        if self.transfer <= 0 or self.block <= 0 or self.segments <= 0 or self.iterations <= 0:
            raise BenchOptionError("-b, -t, -s and -i must be positive")
        if self.block % self.transfer:
            raise BenchOptionError(
                f"block size {self.block} must be a multiple of the transfer size {self.transfer}"
            )
        if self.transfer % 8:
            raise BenchOptionError(f"transfer size {self.transfer} must be a multiple of 8 bytes")
        if not (self.write or self.read):
            raise BenchOptionError("nothing to do: give -w and/or -r")
        if self.read and not self.write and not self.keep:
            pass  # reading files kept by an earlier run (-k) is allowed
        if self.api == "subfile" and self.file_per_proc:
            raise BenchOptionError("-F with -a subfile: use --subfiles rank for file per process")
        if self.api != "subfile" and (self.subfiles is not None or self.ranks_per_subfile):
            raise BenchOptionError("--subfiles and --ranks-per-subfile apply to -a subfile only")
        if self.alignment and (self.alignment & (self.alignment - 1)):
            raise BenchOptionError(f"--alignment {self.alignment} is not a power of two")

    @property
    def transfers_per_block(self) -> int:
        return self.block // self.transfer

    @property
    def hint_dict(self) -> dict[str, str]:
        return dict(self.hints)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["hints"] = self.hint_dict
        data["extra"] = dict(self.extra)
        return data


def parse_apis(text: str) -> tuple[str, ...]:
    """``-a``: one API, a comma list (``posix,mpiio,subfile``, run in that order) or ``all``."""
    names = [name.strip() for name in text.split(",")]
    if names == ["all"]:
        return APIS
    if not all(names):
        raise BenchOptionError(f"-a {text}: an empty API name; list APIs as posix,mpiio,subfile")
    unknown = [name for name in names if name not in APIS]
    if unknown:
        raise BenchOptionError(
            f"-a {text}: unknown API {', '.join(map(repr, unknown))}; choose from "
            f"{', '.join(APIS)}, a comma list of them, or all"
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise BenchOptionError(f"-a {text}: {', '.join(repeated)} given twice")
    return tuple(names)


def hints_from_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """MPI-IO hints given as IOR does: ``IOR_HINT__MPI__romio_cb_write=enable``."""
    env = os.environ if env is None else env
    return {k[len(HINT_ENV_PREFIX) :]: v for k, v in env.items() if k.startswith(HINT_ENV_PREFIX)}


def parse_hints(pairs: list[str] | None, env: Mapping[str, str] | None = None) -> tuple:
    """Hints from the environment, overridden by ``--hint key=value`` arguments."""
    hints = hints_from_environment(env)
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BenchOptionError(f"--hint {pair!r}: expected key=value")
        hints[key.strip()] = value.strip()
    return tuple(sorted(hints.items()))


def filesystem_hints(test_file: str, files: int, block: int) -> dict[str, str]:
    """MPI-IO hints for the file system holding ``test_file`` (``bench --fs-hints``): the
    tuner's ``io.filesystem.romio_hints`` for ``files`` files (one shared file, or one per
    rank with -F) and the stripe size for blocks of ``block`` bytes (docs/TUNING.md).
    Every rank probes the folder itself (the same folder, so the same file system)."""
    from ..io.filesystem import probe, romio_hints, stripe_size_for

    folder = os.path.dirname(os.path.abspath(test_file)) or "."
    return romio_hints(probe(folder), files, stripe_size_for(block))


#: The nine romio_cb / romio_ds configurations of the CURIE study (Wautelet & Kestener).
ROMIO9 = tuple(
    (
        f"cb_{cb}_ds_{ds}",
        (
            ("romio_cb_read", cb),
            ("romio_cb_write", cb),
            ("romio_ds_read", ds),
            ("romio_ds_write", ds),
        ),
    )
    for cb in ("enable", "disable", "automatic")
    for ds in ("enable", "disable", "automatic")
)
