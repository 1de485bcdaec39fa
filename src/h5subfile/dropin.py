"""h5py's ``mpio`` driver served by h5subfile, for unmodified programs (``h5subfile run``).

:func:`install` puts stand-ins for ``h5py.File``, ``Group``, ``Dataset`` and ``Datatype`` into the
``h5py`` module, so that a program importing h5py after it (or calling through the module)
finds them: ``h5py.File(path, mode, driver="mpio", comm=comm, ...)`` opens an h5subfile
:class:`~h5subfile.File` with the plan given to :func:`install` (and the ``H5SUBFILE_*``
environment variables); any other ``h5py.File(...)`` is h5py's own, unchanged. ``isinstance``
and ``issubclass`` with the stand-ins hold for h5py's objects and h5subfile's alike, so a
program's type checks keep working.

Every way a program asks whether h5py is parallel says yes: ``h5py.get_config().mpi`` and
``h5py.h5.get_config().mpi`` (one config, however ``get_config`` was imported after
:func:`install`) are True, and ``h5py.File.atomic`` and ``h5py.Dataset.collective``, which
h5py has only when built with MPI, exist (h5subfile's). Programs that fall back to a serial
writer when h5py is not parallel (dedalus does) take their parallel path. h5py's own modules
read the flag once, when h5py is imported (before :func:`install`), so h5py keeps serving its
own files as the serial build it is; the config's other fields are h5py's, read and set through.

Classes a program derives from the stand-ins work as if derived from h5py's: an instance of
``class Snapshot(h5py.File)``, opened with ``driver="mpio"`` by its own arguments or by the
``super().__init__(path, mode, driver="mpio", comm=comm)`` of its ``__init__``, is an h5subfile
file, otherwise an h5py one, with the program's methods and attributes over either (its
``super()`` calls reach the file's). ``__new__`` only makes the instance; ``__init__`` opens
it, once, and makes it an instance of a class of both (the program's first, named as the
program's), so ``isinstance(f, Snapshot)`` and ``isinstance(f, h5py.File)`` hold and
``type(f) is Snapshot`` does not. Derived ``Group``/``Dataset`` classes wrap h5py's low-level
ids as h5py's do (``MyDataset(plain["x"].id)``), or h5subfile's objects (``MyDataset(f["x"])``:
these have no ``id``).
"""

from __future__ import annotations

from abc import ABCMeta
from collections.abc import Callable
from typing import Any

import h5py
from h5py import h5

from . import files
from .files.node import Node

#: What :func:`install` replaced, as (module, attribute, h5py's own value): restored by uninstall
_ORIGINAL: list[tuple[Any, str, Any]] = []

#: The class of a program's class's instances opened as h5py's or h5subfile's class, by both
_COMBINED: dict[tuple[type, type], type] = {}

#: How a stand-in's arguments open an object: the class, and its positional and keyword arguments
Opening = tuple[Any, tuple[Any, ...], dict[str, Any]]


class _StandIn(ABCMeta):
    """Metaclass of the stand-ins and of the classes derived from them. For a stand-in
    (``h5py.File`` while installed), ``isinstance``/``issubclass`` hold for h5py's class and
    h5subfile's, and a public attribute it lacks is h5py's class's, else h5subfile's (so
    ``h5py.File.atomic`` exists, as in a parallel h5py); for a program's class they are
    Python's. An ABCMeta, because h5py's Group is a MutableMapping, whose metaclass the class of
    a program's instances (both classes, :func:`_combined`) must derive from."""

    def __instancecheck__(cls, obj: Any) -> bool:
        kinds = cls.__dict__.get("_h5subfile_kinds")
        return (kinds is not None and isinstance(obj, kinds)) or super().__instancecheck__(obj)

    def __subclasscheck__(cls, sub: type) -> bool:
        kinds = cls.__dict__.get("_h5subfile_kinds")
        return (kinds is not None and issubclass(sub, kinds)) or super().__subclasscheck__(sub)

    def __getattr__(cls, name: str) -> Any:
        if not name.startswith("_"):
            for kind in cls.__dict__.get("_h5subfile_kinds", ()):
                if hasattr(kind, name):
                    return getattr(kind, name)
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


class _Opens(metaclass=_StandIn):
    """What the stand-ins share: a stand-in called gives h5py's object or h5subfile's; a
    program's class derived from one is opened by ``__init__`` with the arguments it gets there
    (a program's constructor may take other ones), which makes the instance one of both
    classes."""

    #: h5py's class and h5subfile's, in a stand-in's own namespace only (a program's has none)
    _h5subfile_kinds: tuple[type, ...]

    @staticmethod
    def _h5subfile_opening(*args: Any, **kwds: Any) -> Opening:
        """The class (h5py's or h5subfile's) and arguments that open these arguments."""
        raise NotImplementedError

    def __new__(cls, *args: Any, **kwds: Any) -> Any:
        if "_h5subfile_kinds" in cls.__dict__:  # h5py.File(...) itself: h5py's or h5subfile's
            kind, args, kwds = cls._h5subfile_opening(*args, **kwds)
            return kind(*args, **kwds)  # not an instance of cls: no __init__ after
        return object.__new__(cls)  # a program's class: its __init__ reaches ours, which opens

    def __init__(self, *args: Any, **kwds: Any) -> None:
        kind, args, kwds = self._h5subfile_opening(*args, **kwds)
        own = type(self).__dict__.get("_h5subfile_own", type(self))  # opened again: the same
        self.__class__ = _combined(own, kind)
        kind.__init__(self, *args, **kwds)


def _combined(own: type, kind: type) -> type:
    """The class of ``own``'s instances (a program's class) opened as ``kind`` (h5py's or
    h5subfile's class): derived from both, the program's first, so its methods come first and
    their ``super()`` calls reach ``kind``'s; named as the program's."""
    both = _COMBINED.get((own, kind))
    if both is None:
        names = {
            "__module__": own.__module__,
            "__qualname__": own.__qualname__,
            "__doc__": own.__doc__,
            "_h5subfile_own": own,
        }
        both = _COMBINED[own, kind] = type(own)(own.__name__, (own, kind), names)
    return both


def _wraps(h5py_kind: type, ours: type[Node]) -> Callable[..., Opening]:
    """How ``h5py.Group(bind)`` or ``h5py.Dataset(bind)`` opens: h5py's class wraps h5py's
    low-level id; one of h5subfile's objects (which has none) is seen as the class asked for."""

    def opening(bind: Any, *args: Any, **kwds: Any) -> Opening:
        if not isinstance(bind, ours):
            return h5py_kind, (bind, *args), kwds
        if args or kwds:
            raise TypeError(f"{ours.__name__} of h5subfile's: no arguments but the object")
        return ours, (bind._session, bind._path, bind._name), {}

    return opening


class _Config:
    """h5py's config (``h5py.get_config()``) with ``mpi`` True: h5subfile serves parallel
    files. Its other fields are h5py's, read and set through (``track_order = True`` reaches
    h5py)."""

    mpi = True

    def __init__(self, real: Any) -> None:
        object.__setattr__(self, "_real", real)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)  # mpi: read-only, as h5py's


#: h5subfile's classes and the module of h5py's class each stands for while installed.
_MODULES: dict[type, str] = {
    files.File: "h5py._hl.files",
    files.Group: "h5py._hl.group",
    files.Dataset: "h5py._hl.dataset",
    files.Datatype: "h5py._hl.datatype",
}


def install(**plan: Any) -> None:
    """Serve ``h5py.File(..., driver="mpio")`` with h5subfile from now on in this process;
    ``plan``: ``File``'s plan arguments for every such file (``subfiles=``, ``plan="auto"``...).
    Installing again replaces the plan."""
    if not _ORIGINAL:
        _ORIGINAL.extend(
            [(h5py, name, getattr(h5py, name)) for name in ("File", "Group", "Dataset", "Datatype")]
            + [(h5py, "get_config", h5py.get_config), (h5, "get_config", h5.get_config)]
            # Libraries built on h5py (h5netcdf) tell h5py's objects by their class's module.
            + [(ours, "__module__", ours.__module__) for ours in _MODULES]
        )
    real = {name: value for module, name, value in _ORIGINAL if module is h5py}
    chosen = dict(plan)

    def mpio(name: Any, mode: str | None = None, driver: str | None = None, **kwds: Any) -> Any:
        return name, mode or "r", kwds

    def open_file(*args: Any, **kwds: Any) -> Opening:
        """h5py.File's arguments: h5subfile's File with ``driver="mpio"``, else h5py's."""
        if (args[2] if len(args) > 2 else kwds.get("driver")) != "mpio":
            return real["File"], args, kwds
        if len(args) > 3:
            raise TypeError(
                "h5py.File with driver='mpio' under h5subfile takes its options by keyword"
            )
        name, mode, kwds = mpio(*args, **kwds)
        return files.File, (name, mode), {"driver": "mpio", **chosen, **kwds}

    class Group(_Opens):
        """h5py.Group: h5py's groups and h5subfile's."""

        _h5subfile_kinds: tuple[type, ...] = (real["Group"], files.Group)
        _h5subfile_opening = staticmethod(_wraps(real["Group"], files.Group))

    class File(Group):
        """h5py.File: h5subfile's with ``driver="mpio"``, h5py's otherwise."""

        _h5subfile_kinds = (real["File"], files.File)
        _h5subfile_opening = staticmethod(open_file)

    class Dataset(_Opens):
        """h5py.Dataset: h5py's datasets and h5subfile's."""

        _h5subfile_kinds = (real["Dataset"], files.Dataset)
        _h5subfile_opening = staticmethod(_wraps(real["Dataset"], files.Dataset))

    class Datatype(_Opens):
        """h5py.Datatype: h5py's named types and h5subfile's."""

        _h5subfile_kinds = (real["Datatype"], files.Datatype)
        _h5subfile_opening = staticmethod(_wraps(real["Datatype"], files.Datatype))

    config = _Config(real["get_config"]())

    def get_config() -> Any:
        """h5py's config, saying ``mpi`` True: h5subfile serves parallel files."""
        return config

    h5py.File, h5py.Group, h5py.Dataset, h5py.Datatype = File, Group, Dataset, Datatype
    h5py.get_config = h5.get_config = get_config
    for ours, module in _MODULES.items():
        ours.__module__ = module


def uninstall() -> None:
    """Put h5py back as it was."""
    for module, name, value in _ORIGINAL:
        setattr(module, name, value)
    _ORIGINAL.clear()
