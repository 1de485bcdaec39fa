"""h5py's ``Group.copy`` on h5subfile: a group or dataset of any open file (plain h5py's,
h5subfile's, this one's) made again as new objects of a write session, through the public
calls: ``create_group``, ``create_dataset(data=...)``, ``attrs.update`` and links.

Everything the copy would refuse (a type h5subfile does not store, an attribute holding
references) is found first, on every rank alike (each reads the same source), so that a
refused copy makes nothing."""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

from ..errors import UnsupportedError
from ..layout.dtypes import check_dtype
from ..layout.references import holds_refs


def _is_group(obj: Any) -> bool:
    return isinstance(obj, h5py.Group) or hasattr(obj, "create_group")


class Copy:
    """One ``copy`` call: what it copies and how (h5py's keyword arguments)."""

    def __init__(self, shallow: bool, expand_soft: bool, expand_external: bool, no_attrs: bool):
        self.shallow = shallow
        self.expand_soft = expand_soft
        self.expand_external = expand_external
        self.no_attrs = no_attrs

    def _members(self, group: Any, depth: int) -> list[tuple[str, Any, bool]]:
        """(name, link or object, is a link kept as it is) of a group copied at ``depth``."""
        if self.shallow and depth > 0:
            return []
        out = []
        for name in group:
            link = group.get(name, getlink=True)
            kept = (isinstance(link, h5py.SoftLink) and not self.expand_soft) or (
                isinstance(link, h5py.ExternalLink) and not self.expand_external
            )
            out.append((name, link if kept else group[name], kept))
        return out

    def check(self, source: Any, depth: int = 0) -> None:
        """Raise UnsupportedError for what the copy of ``source`` could not make."""
        if not self.no_attrs:
            for key, value in source.attrs.items():
                if holds_refs(value) or isinstance(value, h5py.Reference):
                    raise UnsupportedError(
                        f"copy: attribute {key!r} of {source.name} holds object references "
                        "(dimension scales' do), which h5subfile does not copy"
                    )
        if not _is_group(source):
            check_dtype(source.dtype)
            return
        for _, member, kept in self._members(source, depth):
            if not kept:
                self.check(member, depth + 1)

    def copy(self, parent: Any, name: str, source: Any, depth: int = 0) -> None:
        """Collective: ``source`` made again as ``parent[name]``."""
        if _is_group(source):
            made = parent.create_group(name)
            for member, value, kept in self._members(source, depth):
                if kept:
                    made[member] = value
                else:
                    self.copy(made, member, value, depth + 1)
        else:
            made = parent.create_dataset(name, data=_read(source), **_storage(source))
        if not self.no_attrs and len(source.attrs):
            made.attrs.update(dict(source.attrs.items()))


def _read(dataset: Any) -> np.ndarray:
    """A dataset's values, on every rank: collectively for one of h5subfile's."""
    if isinstance(dataset, h5py.Dataset):
        return np.asarray(dataset[()])
    with dataset.collective:
        return np.asarray(dataset[()])


def _storage(dataset: Any) -> dict[str, Any]:
    """The creation arguments that keep a dataset's storage as it is."""
    spec: dict[str, Any] = {"fillvalue": dataset.fillvalue}
    if dataset.maxshape != dataset.shape:
        spec["maxshape"] = dataset.maxshape
    if dataset.chunks is not None:
        spec.update(chunks=dataset.chunks, shuffle=dataset.shuffle, fletcher32=dataset.fletcher32)
        if dataset.compression is not None:
            spec.update(compression=dataset.compression, compression_opts=dataset.compression_opts)
    return spec
