"""Tuning profiles: a tuning run's recommendation saved as JSON, found again by file system,
mount and rank count (docs/TUNING.md, *Profiles*).

Profiles live in ``$H5SUBFILE_TUNING_DIR`` if set, else ``$XDG_CONFIG_HOME/h5subfile/tuning``
(by default ``~/.config/h5subfile/tuning``), one file each, named after what they match:
``ext4-work-2r-1n.json``. (``H5SUBFILE_PROFILE`` is another thing: the profiler's output
folder, docs/PROFILING.md.)

A damaged profile file is an error naming the file (:class:`CorruptFileError`): a plan chosen
silently from whatever files happen to parse would be hard to explain. Only reads and writes of
these files; no MPI.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorruptFileError, H5SubfileError, as_error
from ..plan import Plan

#: The profile files' format version; files of another version are refused.
FORMAT_VERSION = 1
ENV_DIR = "H5SUBFILE_TUNING_DIR"


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
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        """A profile from its JSON form; raises KeyError, TypeError or ValueError if damaged."""
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"format version {data.get('version')!r}, expected {FORMAT_VERSION}")
        profile = cls(
            filesystem=str(data["filesystem"]),
            mount=str(data["mount"]),
            ranks=int(data["ranks"]),
            nodes=int(data["nodes"]),
            plan=dict(data["plan"]),
            summary=dict(data.get("summary", {})),
        )
        profile_plan(profile)  # a plan this version can build
        return profile


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
        raise as_error(exc) from exc
    return path


def read_profile(path: Path) -> Profile:
    """One profile file; a damaged one raises :class:`CorruptFileError` naming it."""
    try:
        return Profile.from_dict(json.loads(path.read_text()))
    except OSError as exc:
        raise as_error(exc) from exc
    except (ValueError, KeyError, TypeError, AttributeError, H5SubfileError) as exc:
        raise CorruptFileError(
            f"tuning profile {path} is damaged ({type(exc).__name__}: {exc}); delete it or "
            "tune again to replace it"
        ) from exc


def load_profiles(directory: Path | None = None) -> list[tuple[Path, Profile]]:
    """Every profile in ``directory`` (default :func:`profile_dir`), by file name; none if the
    folder does not exist."""
    folder = profile_dir() if directory is None else directory
    if not folder.is_dir():
        return []
    return [(path, read_profile(path)) for path in sorted(folder.glob("*.json"))]


def match_profile(
    filesystem: str, mount: str, ranks: int, nodes: int, directory: Path | None = None
) -> tuple[Path, Profile] | None:
    """The profile for a job: the same file system, mount and rank count (the same node count
    preferred), else the same file system with the nearest rank count (then the nearest node
    count), else None."""
    profiles = load_profiles(directory)
    exact = [
        (p, f)
        for p, f in profiles
        if f.filesystem == filesystem and f.mount == mount and f.ranks == ranks
    ]
    if exact:
        return min(exact, key=lambda item: (abs(item[1].nodes - nodes), str(item[0])))
    same = [(p, f) for p, f in profiles if f.filesystem == filesystem]
    if not same:
        return None
    return min(
        same,
        key=lambda item: (abs(item[1].ranks - ranks), abs(item[1].nodes - nodes), str(item[0])),
    )


def auto_plan(
    filesystem: str, mount: str, ranks: int, nodes: int, directory: Path | None = None
) -> tuple[Plan | None, str]:
    """The plan a job should use and a one-line reason.

    Returns
    -------
    tuple[Plan | None, str]
        The matching profile's plan and ``"tuning profile FILE for ext4 on /work, 2 ranks"``
        (with the nearest profile's own rank count when it differs); or None and
        ``"no tuning profile for ext4 on /work, 2 ranks: defaults"``.
    """
    found = match_profile(filesystem, mount, ranks, nodes, directory)
    if found is None:
        return None, f"no tuning profile for {filesystem} on {mount}, {ranks} ranks: defaults"
    path, profile = found
    reason = (
        f"tuning profile {path} for {profile.filesystem} on {profile.mount}, {profile.ranks} ranks"
    )
    if profile.ranks != ranks or profile.mount != mount:
        reason += f" (nearest to {filesystem} on {mount}, {ranks} ranks)"
    return profile_plan(profile), reason
