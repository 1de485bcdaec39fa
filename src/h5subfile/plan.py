"""The plan: every write-time choice for one file, in one frozen object.

One table (:data:`PLAN_FIELDS`) declares each tunable once; it feeds the ``File`` arguments, the CLI
flags (``--subfiles``...), the environment overrides (``H5SUBFILE_SUBFILES``...) and the JSON record
stored in every file.

The same table gives the tuner its search space: each field's ``candidates`` for a rank count
(docs/TUNING.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import PlanError
from .units import format_bytes, parse_size

GROUPING_KEYWORDS = ("node", "rank")


def parse_subfiles(value: Any) -> int | str | None:
    """Normalise ``subfiles``: a positive int, ``"node"``, ``"rank"`` or None (default)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in GROUPING_KEYWORDS:
            return text
        if not text.isdigit():
            raise PlanError(
                f"subfiles={value!r}: expected a positive integer, 'node' (one subfile per node) "
                "or 'rank' (one file per process)"
            )
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"subfiles={value!r}: expected a positive integer, 'node' or 'rank'")
    return value


def parse_positive_int(name: str) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        if value is None or value == "":
            return None
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: JSON's 1e999, infinite
            raise PlanError(f"{name}={value!r}: expected a positive integer") from None
        if isinstance(value, bool) or number < 1 or str(number) != str(value).strip():
            raise PlanError(f"{name}={value!r}: expected a positive integer")
        return number

    return parse


def parse_bool(name: str) -> Callable[[Any], bool | None]:
    def parse(value: Any) -> bool | None:
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise PlanError(f"{name}={value!r}: expected true or false")

    return parse


#: The largest byte size any plan field takes: a file offset (``off_t``, 64-bit signed).
MAX_BYTES = (1 << 63) - 1
#: The largest ``alignment``: far above any stripe or block worth aligning to, while every
#: dataset aligned to more would start that far into its subfile (2**50 made HDF5 fail with
#: EFBIG, "File too large", on ext4).
MAX_ALIGNMENT = 1 << 30


def physical_memory() -> int:
    """This machine's memory in bytes (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def parse_bytes(
    name: str, power_of_two: bool = False, maximum: int = MAX_BYTES
) -> Callable[[Any], int | None]:
    """A byte size (``1048576``, ``"1m"``, ``"4MiB"``; IOR's binary suffixes) of at most
    ``maximum`` bytes; 0 or "off" is None."""

    def parse(value: Any) -> int | None:
        if value is None or value == "" or str(value).strip().lower() in ("off", "none"):
            return None
        if isinstance(value, bool):
            raise PlanError(f"{name}={value!r}: expected a size in bytes (e.g. 1048576 or 1m)")
        try:
            number = parse_size(value)
        except ValueError as exc:
            raise PlanError(f"{name}={value!r}: {exc}") from None
        if number == 0:
            return None
        if power_of_two and number & (number - 1):
            raise PlanError(f"{name}={value!r}: must be a power of two (e.g. 4096, 1m, 4m)")
        if number > maximum:
            raise PlanError(f"{name}={value!r}: at most {maximum} bytes")
        return number

    return parse


def parse_aggregators(value: Any) -> int | None:
    """``aggregators``: a positive int (writers per subfile), or 0/"direct"/None (every rank
    writes its own bytes)."""
    if value is None or value == "" or str(value).strip().lower() in ("direct", "0", "off", "none"):
        return None
    return parse_positive_int("aggregators")(value)


def parse_compression(value: Any) -> str | None:
    """The default filter of new datasets: ``"name"`` or ``"name:level"`` ("none" is None).

    The name is checked against the known filters when a dataset is created (io/filters.py,
    which knows hdf5plugin); here only the form is checked, so that the plan stays pure.
    """
    if value is None or value == "" or value is False:
        return None
    text = str(value).strip().lower()
    if text in ("none", "off", "false", "0"):
        return None
    name, _, level = text.partition(":")
    if (
        not name
        or not name.replace("_", "").isalnum()
        or (level and not level.lstrip("-").isdigit())
    ):
        raise PlanError(
            f"compression={value!r}: expected a filter name with an optional level, such as "
            "'gzip', 'gzip:6', 'zstd:3', 'lz4', 'blosc', 'blosc2', 'bitshuffle', 'lzf'"
        )
    return text


def grouping_candidates(ranks: int) -> tuple[Any, ...]:
    """``subfiles`` worth trying at ``ranks`` ranks: the default (one per node), one file, file
    per process."""
    return (None, 1, "rank") if ranks > 1 else (None,)


def factor_candidates(ranks: int) -> tuple[Any, ...]:
    """``ranks_per_subfile`` worth trying: the default (unset), then powers of two from 2 to
    ``ranks // 2``."""
    factors = []
    factor = 2
    while factor <= ranks // 2:
        factors.append(factor)
        factor *= 2
    return (None, *factors)


def aggregator_candidates(ranks: int) -> tuple[Any, ...]:
    """``aggregators`` worth trying: direct (the default), then 1 and 2 writers per subfile
    where a subfile can have more ranks than writers."""
    return (None, *(count for count in (1, 2) if count < ranks))


def fixed_candidates(*values: Any) -> Callable[[int], tuple[Any, ...]]:
    """Candidates that do not depend on the rank count (the first is the default)."""

    def candidates(ranks: int) -> tuple[Any, ...]:
        return values

    return candidates


@dataclass(frozen=True)
class PlanField:
    """One tunable: its name, CLI flag, environment variable, help and parser.

    ``candidates`` (for the tuner, ``tune/space.py``): the values worth trying at a given rank
    count, the default (None) first; None for fields the tuner leaves alone. ``axis`` joins
    fields that are one choice (``subfiles`` and ``ranks_per_subfile`` are both the grouping);
    ``default_label`` names what None means, for tables.
    """

    name: str
    env: str
    help: str
    parse: Callable[[Any], Any]
    switch: bool = False  # a CLI flag without a value (--fsync)
    candidates: Callable[[int], tuple[Any, ...]] | None = None
    axis: str = ""
    default_label: str = "default"

    @property
    def axis_name(self) -> str:
        """The search axis this field belongs to (its own name unless ``axis`` says)."""
        return self.axis or self.name

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


PLAN_FIELDS: tuple[PlanField, ...] = (
    PlanField(
        "subfiles",
        "H5SUBFILE_SUBFILES",
        "number of subfiles (ranks in contiguous blocks), 'node' (one per node, the default), "
        "'rank' (file per process); 1 writes one conventional HDF5 file",
        parse_subfiles,
        candidates=grouping_candidates,
        axis="grouping",
        default_label="node",
    ),
    PlanField(
        "ranks_per_subfile",
        "H5SUBFILE_RANKS_PER_SUBFILE",
        "ranks writing each subfile (the paper's subfiling factor)",
        parse_positive_int("ranks_per_subfile"),
        candidates=factor_candidates,
        axis="grouping",
    ),
    PlanField(
        "fsync",
        "H5SUBFILE_FSYNC",
        "fsync every file written before the master is committed (durable against power loss)",
        parse_bool("fsync"),
        switch=True,
    ),
    PlanField(
        "compression",
        "H5SUBFILE_COMPRESSION",
        "default filter of new datasets: gzip, lzf, zstd, lz4, blosc, blosc2, bitshuffle, with an "
        "optional level (gzip:6, zstd:3); compressed datasets are chunked (default none)",
        parse_compression,
    ),
    PlanField(
        "shuffle",
        "H5SUBFILE_SHUFFLE",
        "byte-shuffle before the default compression (HDF5's shuffle filter)",
        parse_bool("shuffle"),
        switch=True,
    ),
    PlanField(
        "chunk_size",
        "H5SUBFILE_CHUNK_SIZE",
        "target bytes per chunk when the plan picks chunk shapes (default 1m)",
        parse_bytes("chunk_size"),
    ),
    PlanField(
        "aggregators",
        "H5SUBFILE_AGGREGATORS",
        "ranks per subfile that write (two-phase I/O: the others send them their data); "
        "'direct' (the default): every rank writes its own bytes",
        parse_aggregators,
        candidates=aggregator_candidates,
        default_label="direct",
    ),
    PlanField(
        "buffer_size",
        "H5SUBFILE_BUFFER_SIZE",
        "bytes an aggregator collects before it writes (bounds its memory; default 16m)",
        parse_bytes("buffer_size"),
        candidates=fixed_candidates(None, 4 << 20, 64 << 20),
        default_label="16m",
    ),
    PlanField(
        "alignment",
        "H5SUBFILE_ALIGNMENT",
        "every dataset's data (and chunk) in a subfile starts at a multiple of this many bytes, "
        "a power of two up to 1g (H5Pset_alignment; default off; use the stripe size on "
        "Lustre/GPFS)",
        parse_bytes("alignment", power_of_two=True, maximum=MAX_ALIGNMENT),
        candidates=fixed_candidates(None, 64 << 10, 1 << 20, 4 << 20),
        default_label="off",
    ),
    PlanField(
        "transfer_size",
        "H5SUBFILE_TRANSFER_SIZE",
        "the largest single write or read a rank issues (default: writes 1.5 MiB, reads 1 GiB)",
        parse_bytes("transfer_size"),
        candidates=fixed_candidates(None, 1 << 20, 4 << 20, 16 << 20),
        default_label="1.5m/1g",
    ),
    # Not searched by the tuner: it times single writes without computation between them,
    # where writing in the background only adds a copy.
    PlanField(
        "async_writes",
        "H5SUBFILE_ASYNC_WRITES",
        "write-behind: writes return once their bytes are copied, a background thread writes "
        "them; errors surface at the next collective call (flush, close wait for them)",
        parse_bool("async_writes"),
        switch=True,
    ),
    PlanField(
        "async_buffer_size",
        "H5SUBFILE_ASYNC_BUFFER_SIZE",
        "with async_writes: the most bytes a rank holds waiting to be written in the "
        "background; a write waits for room (default 256m)",
        parse_bytes("async_buffer_size"),
        default_label="256m",
    ),
    PlanField(
        "async_zero_copy",
        "H5SUBFILE_ASYNC_ZERO_COPY",
        "with async_writes: no copy; the arrays written must stay unchanged until flush(), "
        "commit() or close() returns (as ADIOS2's deferred Put)",
        parse_bool("async_zero_copy"),
        switch=True,
    ),
    PlanField(
        "async_always",
        "H5SUBFILE_ASYNC_ALWAYS",
        "with async_writes: every write goes behind (by default each call writes directly "
        "when that costs less, measured as the session goes)",
        parse_bool("async_always"),
        switch=True,
    ),
    PlanField(
        "checksums",
        "H5SUBFILE_CHECKSUMS",
        "record a checksum of every piece written (default on; off for data that can be "
        "regenerated: reads and verify then check subfile identities only)",
        parse_bool("checksums"),
    ),
    PlanField(
        "commit_every_step",
        "H5SUBFILE_COMMIT_EVERY_STEP",
        "commit the file each time a collective call starts a new top-level group (a step), so "
        "that readers following the file (h5subfile.follow, bdcats --follow) see each step",
        parse_bool("commit_every_step"),
        switch=True,
    ),
)

#: Plan fields that also apply when a file is opened for reading.
READ_FIELDS = ("aggregators", "buffer_size", "transfer_size")

DEFAULT_CHUNK_SIZE = 1 << 20
DEFAULT_BUFFER_SIZE = 16 << 20
MIN_BUFFER_SIZE = 4096
DEFAULT_ASYNC_BUFFER_SIZE = 256 << 20


@dataclass(frozen=True)
class Plan:
    """Every write-time choice for one file.

    Parameters
    ----------
    subfiles
        ``int`` M: M subfiles, ranks in contiguous blocks; ``"node"``: one subfile per node;
        ``"rank"``: one file per process; None: the default (``"node"``), unless
        ``ranks_per_subfile`` is given.
    ranks_per_subfile
        k ranks per subfile (the paper's subfiling factor); exclusive with ``subfiles``.
    fsync
        fsync every written file before the master is committed.
    compression, shuffle, chunk_size
        The default storage of new datasets: a filter ``"name[:level]"`` (None: contiguous),
        HDF5's shuffle before it, and the target chunk size when the plan picks chunk shapes.
        ``create_dataset(..., compression=...)`` overrides them per dataset.
    aggregators, buffer_size
        Two-phase I/O: ``aggregators`` ranks per subfile write (None: every rank writes its own
        bytes), each collecting at most ``buffer_size`` bytes before it writes.
    alignment
        Start every dataset's data in a subfile at a multiple of this many bytes (power of two).
    transfer_size
        The largest single write or read a rank issues (None: writes of at most 1.5 MiB
        per system call to the data files, reads up to 1 GiB).
    async_writes, async_buffer_size
        Write-behind: writes return once the library holds a copy of their bytes, which one
        background thread per rank writes in order, holding at most ``async_buffer_size``
        bytes (None: 256 MiB; a write waits for room). Errors met in the background are
        raised on every rank at the next collective call (``flush``, ``close`` wait for the
        writes). Each write call goes behind only where that costs the caller less than
        writing directly, from what copies and writes cost as the session goes
        (``io/ways.py``; the choice is recorded in the session's entry, shown by ``info``).
    async_always
        With ``async_writes``: every write call goes behind, whatever it costs.
    async_zero_copy
        With ``async_writes``: the background thread writes straight from the caller's arrays
        (no copy), which must stay unchanged until ``flush()``, ``commit()`` or ``close()``
        returns; they still count against ``async_buffer_size``.
    checksums
        Record the checksum of every piece written, hashed as its bytes are written (default
        True). False for data that can be regenerated: the session's datasets are recorded
        without checksums, reads and ``verify`` check their subfiles' identities only.
    commit_every_step
        Commit the file (``File.commit``) whenever a collective call starts a new top-level
        group: the steps before it are complete, and readers following the file see them.
    """

    subfiles: int | str | None = None
    ranks_per_subfile: int | None = None
    fsync: bool = False
    compression: str | None = None
    shuffle: bool = False
    chunk_size: int | None = None
    aggregators: int | None = None
    buffer_size: int | None = None
    alignment: int | None = None
    transfer_size: int | None = None
    async_writes: bool = False
    async_buffer_size: int | None = None
    async_zero_copy: bool = False
    async_always: bool = False
    checksums: bool = True
    commit_every_step: bool = False

    def __post_init__(self) -> None:
        if self.subfiles is not None and self.ranks_per_subfile is not None:
            raise PlanError(
                f"give either subfiles={self.subfiles!r} or ranks_per_subfile="
                f"{self.ranks_per_subfile!r}, not both"
            )
        if self.buffer_size is not None and self.buffer_size < MIN_BUFFER_SIZE:
            raise PlanError(
                f"buffer_size={self.buffer_size}: an aggregator's buffer must hold at least "
                f"{MIN_BUFFER_SIZE} bytes"
            )
        if self.async_buffer_size is not None and self.async_buffer_size < MIN_BUFFER_SIZE:
            raise PlanError(
                f"async_buffer_size={self.async_buffer_size}: the write-behind buffer must "
                f"hold at least {MIN_BUFFER_SIZE} bytes"
            )
        memory = physical_memory()
        for name in ("buffer_size", "async_buffer_size"):
            size = getattr(self, name)
            if size is not None and memory and size > memory:
                raise PlanError(
                    f"{name}={size}: a buffer in memory, larger than this machine's "
                    f"{format_bytes(memory)} of memory"
                )

    @classmethod
    def parse(cls, env: Mapping[str, str] | None = None, **values: Any) -> Plan:
        """Build a plan from arguments; an argument left None falls back to its environment variable."""
        env = os.environ if env is None else env
        known = {field.name for field in PLAN_FIELDS}
        unknown = set(values) - known
        if unknown:
            raise PlanError(f"unknown plan field(s) {sorted(unknown)}; known: {sorted(known)}")
        parsed: dict[str, Any] = {}
        explicit_grouping = any(
            values.get(n) is not None for n in ("subfiles", "ranks_per_subfile")
        )
        for field in PLAN_FIELDS:
            given = values.get(field.name)
            value = field.parse(given)
            grouping_field = field.name in ("subfiles", "ranks_per_subfile")
            # An argument given as "off"/"direct" (parsed to None) overrides the environment.
            if value is None and given in (None, "") and not (grouping_field and explicit_grouping):
                value = field.parse(env.get(field.env))
            if value is not None:
                parsed[field.name] = value
        return cls(**parsed)

    @property
    def chunk_bytes(self) -> int:
        return self.chunk_size or DEFAULT_CHUNK_SIZE

    @property
    def buffer_bytes(self) -> int:
        return self.buffer_size or DEFAULT_BUFFER_SIZE

    @property
    def async_buffer_bytes(self) -> int:
        return self.async_buffer_size or DEFAULT_ASYNC_BUFFER_SIZE

    def read_only(self) -> Plan:
        """The fields that matter when reading (the others reset to their defaults)."""
        return Plan(**{name: getattr(self, name) for name in READ_FIELDS})

    @property
    def grouping(self) -> int | str:
        """The grouping rule actually used: an int, ``"node"``, ``"rank"`` or ``"k=<n>"``."""
        if self.ranks_per_subfile is not None:
            return f"k={self.ranks_per_subfile}"
        return "node" if self.subfiles is None else self.subfiles

    def to_dict(self) -> dict[str, Any]:
        """The fields by name (every value is a number, a string, a flag or None: nothing to
        copy deeply, as ``dataclasses.asdict`` does at ten times the cost on every open)."""
        return {field.name: getattr(self, field.name) for field in PLAN_FIELDS}

    def set_fields(self) -> dict[str, Any]:
        """The fields whose value is not the default, by name."""
        return set_fields(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        known = {field.name for field in PLAN_FIELDS}
        return cls(**{k: v for k, v in data.items() if k in known})


_DEFAULTS = Plan().to_dict()


def set_fields(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a plan's dict (:meth:`Plan.to_dict`, a record's) whose value is not the
    default (a field the dict lacks is left out)."""
    return {k: v for k, v in plan.items() if k not in _DEFAULTS or v != _DEFAULTS[k]}
