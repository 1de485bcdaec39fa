"""Tuning profiles: a tuning run's recommendation saved as JSON, found again by file system,
mount and rank count (docs/TUNING.md, *Profiles*).

Profiles live in ``$H5SUBFILE_TUNING_DIR`` if set, else ``$XDG_CONFIG_HOME/h5subfile/tuning``
(by default ``~/.config/h5subfile/tuning``), one file each, named after what they match:
``ext4-work-2r-1n.json``. (``H5SUBFILE_PROFILE`` is another thing: the profiler's output
folder, docs/PROFILING.md.)

Every value is checked when a profile is read (the plan's fields by the plan's own parsers). A
profile that cannot be used (not a regular file, unreadable, damaged) is skipped with a warning
naming it, once per process, and the job goes on with the others: a job should not fail, nor
hang on a FIFO, for a file it only consults. Only reads and writes of these files; no MPI.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorruptFileError, H5SubfileError, error_class, keep_errno
from ..plan import Plan, parse_positive_int
from .regular import open_regular

#: The profile files' format version; files of another version are refused.
FORMAT_VERSION = 1
ENV_DIR = "H5SUBFILE_TUNING_DIR"
#: The most ranks (and nodes) a profile can be for: an MPI communicator's size is a C ``int``.
MAX_RANKS = (1 << 31) - 1
#: The largest profile file read: one is a few hundred bytes; anything much larger is not one.
MAX_PROFILE_BYTES = 1 << 20
#: What a warning about a skipped profile adds: what to do about it.
SKIPPED = "skipped (delete it, or tune again to replace it)"

_warned: set[str] = set()  # the skipped profiles this process has warned about


@dataclass(frozen=True)
class Profile:
    """One tuning run's outcome for a file system, mount and job size.

    ``plan``: the recommended plan's fields (empty: the default stood); ``summary``: margin,
    spread, noise, trials, date and the reason, as the tuner reported them.
    """

    filesystem: str
    mount: str
    ranks: int
    nodes: int
    plan: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Profile:
        """A profile from its JSON form, every value checked; raises ValueError (or the plan's
        PlanError) naming the first that is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, found {type(data).__name__}")
        version = data.get("version")
        if type(version) is not int or version != FORMAT_VERSION:
            raise ValueError(f"format version {version!r}, expected {FORMAT_VERSION}")
        ranks = _count(data, "ranks")
        nodes = _count(data, "nodes")
        if nodes > ranks:
            raise ValueError(f"nodes={nodes} but ranks={ranks}: a node runs one rank at least")
        profile = cls(
            filesystem=_entry(data, "filesystem", str),
            mount=_entry(data, "mount", str),
            ranks=ranks,
            nodes=nodes,
            plan=dict(_entry(data, "plan", dict)),
            summary=dict(_entry(data, "summary", dict, {})),
        )
        profile_plan(profile)  # a plan this version can build
        return profile


def _entry(data: Mapping[str, Any], key: str, kind: type, default: Any = None) -> Any:
    """``data[key]``, which must be a ``kind`` (``default`` when missing, unless None)."""
    if key not in data and default is not None:
        return default
    if key not in data:
        raise ValueError(f"{key} is missing")
    value = data[key]
    if not isinstance(value, kind) or (kind is str and not value):
        raise ValueError(
            f"{key}={value!r}: expected a {'non-empty string' if kind is str else 'JSON object'}"
        )
    return value


def _count(data: Mapping[str, Any], key: str) -> int:
    """``data[key]``: a positive whole number (as the plan's counts parse) up to MAX_RANKS."""
    if key not in data:
        raise ValueError(f"{key} is missing")
    count = parse_positive_int(key)(data[key])
    if count is None or count > MAX_RANKS:
        raise ValueError(f"{key}={data[key]!r}: expected a positive integer up to {MAX_RANKS}")
    return count


def profile_plan(profile: Profile) -> Plan:
    """The plan of ``profile``, each value parsed as ``File`` arguments are (unknown fields and
    bad values raise :class:`PlanError`); the environment is not consulted."""
    return Plan.parse(env={}, **profile.plan)


def profile_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where profiles live: ``$H5SUBFILE_TUNING_DIR``, else
    ``$XDG_CONFIG_HOME/h5subfile/tuning``, else ``~/.config/h5subfile/tuning``."""
    env = os.environ if env is None else env
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR]).expanduser()
    config = env.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(config):  # the XDG specification ignores relative paths
        config = str(Path("~/.config").expanduser())
    return Path(config) / "h5subfile" / "tuning"


def profile_name(profile: Profile) -> str:
    """The file name of ``profile``: ``<fs>-<mount>-<ranks>r-<nodes>n.json``."""
    mount = re.sub(r"[^A-Za-z0-9]+", "_", profile.mount).strip("_") or "root"
    return f"{profile.filesystem}-{mount}-{profile.ranks}r-{profile.nodes}n.json"


def not_writable(folder: Path, exc: OSError) -> H5SubfileError:
    """The error for a tuning folder where ``exc`` stopped a write: of ``exc``'s class in the
    hierarchy (EACCES, EROFS: PermissionDeniedError), naming the folder and the errno."""
    code = exc.errno
    name = errno.errorcode.get(code, "") if code is not None else ""
    cause = f"{name} ([Errno {code}] {exc.strerror})" if code is not None else str(exc)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(folder) else ""
    message = (
        f"tuning folder {folder} is not writable: {cause}{where}; set {ENV_DIR} to a folder "
        "this job can write"
    )
    return keep_errno(error_class(type(exc).__name__, code)(message), code)


def require_writable(directory: Path | None = None) -> Path:
    """The tuning folder (default :func:`profile_dir`), made if missing, once a file was
    created and removed in it: permission bits do not tell (root writes through them), nor
    do they show a read-only mount. Raises :func:`not_writable`'s error."""
    folder = profile_dir() if directory is None else directory
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, trial = tempfile.mkstemp(prefix=".writable-", suffix=".partial", dir=folder)
        os.close(fd)
        os.unlink(trial)
    except OSError as exc:
        raise not_writable(folder, exc) from exc
    return folder


def save_profile(profile: Profile, directory: Path | None = None) -> Path:
    """Write ``profile`` (atomically, replacing the one for the same key); its path."""
    folder = profile_dir() if directory is None else directory
    path = folder / profile_name(profile)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(profile.to_dict(), indent=2, sort_keys=True) + "\n")
        os.replace(partial, path)
    except OSError as exc:
        raise not_writable(folder, exc) from exc
    return path


def read_profile(path: Path) -> Profile:
    """One profile file. Raises, naming it: NotRegularFileError (a FIFO, a device, a folder:
    refused without blocking), the OSError's error when it cannot be read, CorruptFileError
    when it is damaged (not JSON, larger than :data:`MAX_PROFILE_BYTES`, a value wrong)."""
    what = f"tuning profile {path}"
    try:
        with os.fdopen(open_regular(str(path), os.O_RDONLY, "tuning profile"), "rb") as file:
            data = file.read(MAX_PROFILE_BYTES + 1)
    except H5SubfileError:
        raise
    except OSError as exc:
        code = exc.errno
        raise keep_errno(
            error_class(type(exc).__name__, code)(f"{what} cannot be read: {exc}"), code
        ) from exc
    try:
        if len(data) > MAX_PROFILE_BYTES:
            raise ValueError(f"larger than {MAX_PROFILE_BYTES} bytes")
        return Profile.from_dict(json.loads(data))
    except (ValueError, RecursionError, H5SubfileError) as exc:  # JSON nested too deep
        raise CorruptFileError(f"{what} is damaged ({type(exc).__name__}: {exc})") from exc


@dataclass(frozen=True)
class Found:
    """A folder's profiles: those read (``profiles``, by file name) and those that cannot be
    used (``skipped``: each file and the error naming it)."""

    profiles: list[tuple[Path, Profile]]
    skipped: list[tuple[Path, H5SubfileError]]


def load_profiles(directory: Path | None = None) -> Found:
    """Every profile in ``directory`` (default :func:`profile_dir`), by file name; none if the
    folder does not exist."""
    folder = profile_dir() if directory is None else directory
    found = Found([], [])
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            found.profiles.append((path, read_profile(path)))
        except H5SubfileError as exc:
            found.skipped.append((path, exc))
    return found


def warn_skipped(skipped: list[tuple[Path, H5SubfileError]]) -> None:
    """Warn (RuntimeWarning) of each profile that cannot be used, once per process for the
    same file and reason (not at every file opened with ``plan="auto"``)."""
    for _, error in skipped:
        message = f"{error}: {SKIPPED}"
        if message not in _warned:
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            _warned.add(message)


def ranked(
    profiles: list[tuple[Path, Profile]], filesystem: str, mount: str, ranks: int, nodes: int
) -> list[tuple[Path, Profile]]:
    """The profiles of ``filesystem``, best first: those of the same mount and rank count
    (the nearest node count first), then the others by the nearest rank count, then the
    nearest node count; ties by file name."""

    def key(item: tuple[Path, Profile]) -> tuple[bool, int, int, str]:
        path, profile = item
        exact = profile.mount == mount and profile.ranks == ranks
        return (not exact, abs(profile.ranks - ranks), abs(profile.nodes - nodes), str(path))

    return sorted((item for item in profiles if item[1].filesystem == filesystem), key=key)


def auto_plan(
    filesystem: str,
    mount: str,
    ranks: int,
    nodes: int,
    directory: Path | None = None,
    fits: Callable[[Plan], None] | None = None,
) -> tuple[Plan | None, str]:
    """The plan a job should use and a one-line reason: the first profile of :func:`ranked`
    whose plan ``fits`` the job (a function raising :class:`H5SubfileError` saying why not;
    every plan fits without it). Profiles that cannot be used are warned about
    (:func:`warn_skipped`); those that do not fit are named in the reason.

    Returns
    -------
    tuple[Plan | None, str]
        The profile's plan and ``"tuning profile FILE for ext4 on /work, 2 ranks"`` (with
        ``(nearest to ...)`` when made for another mount or rank count); or None and
        ``"no tuning profile for ext4 on /work, 2 ranks: defaults"``. Either ends with
        ``"; not fitting this job: FILE (why), ..."`` when better-ranked profiles did not fit.
    """
    found = load_profiles(directory)
    warn_skipped(found.skipped)
    unfit: list[tuple[Path, str]] = []
    for path, profile in ranked(found.profiles, filesystem, mount, ranks, nodes):
        plan = profile_plan(profile)
        try:
            if fits is not None:
                fits(plan)
        except H5SubfileError as exc:
            unfit.append((path, str(exc)))
            continue
        reason = f"tuning profile {path} for {profile.filesystem} on {profile.mount}, " + (
            f"{profile.ranks} ranks"
        )
        if profile.ranks != ranks or profile.mount != mount:
            reason += f" (nearest to {filesystem} on {mount}, {ranks} ranks)"
        return plan, reason + _unfit_text(unfit)
    if unfit:
        reason = f"no tuning profile fits {filesystem} on {mount}, {ranks} ranks, {nodes} node(s)"
    else:
        reason = f"no tuning profile for {filesystem} on {mount}, {ranks} ranks"
    return None, f"{reason}: defaults{_unfit_text(unfit)}"


def _unfit_text(unfit: list[tuple[Path, str]], shown: int = 3) -> str:
    """``"; not fitting this job: A (why), B (why)"``, the first ``shown`` profiles that did
    not fit."""
    if not unfit:
        return ""
    text = ", ".join(f"{path} ({why})" for path, why in unfit[:shown])
    more = f" and {len(unfit) - shown} more" if len(unfit) > shown else ""
    return f"; not fitting this job: {text}{more}"
