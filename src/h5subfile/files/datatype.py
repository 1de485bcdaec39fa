"""``h5py.Datatype`` on h5subfile: a named (committed) type of the file, made by
``group[name] = dtype`` (collective) and used as ``create_dataset(..., dtype=group[name])``,
whose datasets then share it in the file as HDF5's do."""

from __future__ import annotations

import numpy as np

from .node import Node


class Datatype(Node):
    """A named type, like ``h5py.Datatype``: its ``dtype``, ``attrs``, ``name``, ``ref``."""

    _h5py_kind = "Datatype"

    @property
    def dtype(self) -> np.dtype:
        dtype = self._session.node(self._path).dtype
        assert dtype is not None
        return dtype

    def __repr__(self) -> str:
        if self._session.closed:
            return "<Closed h5subfile.Datatype>"
        return f'<h5subfile.Datatype "{self.name}": {self.dtype}>'
