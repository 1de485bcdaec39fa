"""h5py's ``mpio`` driver served by h5subfile, for unmodified programs (``h5subfile run``).

:func:`install` puts stand-ins for ``h5py.File``, ``h5py.Group`` and ``h5py.Dataset`` into the
``h5py`` module, so that a program importing h5py after it (or calling through the module)
finds them: ``h5py.File(path, mode, driver="mpio", comm=comm, ...)`` opens an h5subfile
:class:`~h5subfile.File` with the plan given to :func:`install` (and the ``H5SUBFILE_*``
environment variables); any other ``h5py.File(...)`` is h5py's own, unchanged. ``isinstance``
with the stand-ins holds for h5py's objects and h5subfile's alike, so a program's type checks
keep working, and ``h5py.get_config().mpi`` says True: parallel files are available.
"""

from __future__ import annotations

from typing import Any

import h5py

from . import files

#: h5py's own classes and config, as they were before :func:`install` (restored by uninstall)
_ORIGINAL: dict[str, Any] = {}


class _Either(type):
    """A stand-in class: ``isinstance(x, h5py.File)`` holds for h5py's File and h5subfile's."""

    kinds: tuple[type, ...] = ()

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.kinds)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls.kinds)


class _Config:
    """``h5py.get_config()`` with ``mpi`` True (h5subfile serves parallel files), the rest
    h5py's own."""

    def __init__(self, real: Any) -> None:
        self._real = real

    mpi = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def install(**plan: Any) -> None:
    """Serve ``h5py.File(..., driver="mpio")`` with h5subfile from now on in this process;
    ``plan``: ``File``'s plan arguments for every such file (``subfiles=``, ``plan="auto"``...).
    Installing again replaces the plan."""
    if not _ORIGINAL:
        _ORIGINAL.update(
            File=h5py.File, Group=h5py.Group, Dataset=h5py.Dataset, get_config=h5py.get_config
        )
    real_file = _ORIGINAL["File"]
    chosen = dict(plan)

    class File(metaclass=_Either):
        """h5py.File: h5subfile's with ``driver="mpio"``, h5py's otherwise."""

        kinds = (real_file, files.File)

        def __new__(
            cls,
            name: Any,
            mode: str | None = None,
            driver: str | None = None,
            *args: Any,
            **kwds: Any,
        ) -> Any:
            if driver != "mpio":
                return real_file(name, mode, driver, *args, **kwds)
            if args:
                raise TypeError(
                    "h5py.File with driver='mpio' under h5subfile takes its options by keyword"
                )
            return files.File(name, mode or "r", driver="mpio", **{**chosen, **kwds})

    class Group(metaclass=_Either):
        kinds = (_ORIGINAL["Group"], files.Group)

    class Dataset(metaclass=_Either):
        kinds = (_ORIGINAL["Dataset"], files.Dataset)

    real_config = _ORIGINAL["get_config"]
    h5py.File, h5py.Group, h5py.Dataset = File, Group, Dataset
    h5py.get_config = lambda: _Config(real_config())


def uninstall() -> None:
    """Put h5py back as it was."""
    for name, value in _ORIGINAL.items():
        setattr(h5py, name, value)
    _ORIGINAL.clear()
