"""Public objects: File, Group, Dataset, AttributeManager (h5py-like), thin facades over the
engine (:mod:`h5subfile.engine`).

Every structural call (open, close, create_group, create_dataset, write_dataset(s), attribute
changes, resize, Dataset.write, writes inside ``with dset.collective:``) is collective: every
rank of the file's communicator calls it with the same arguments (a block, a selection or
local data may differ per rank). A facade parses its arguments into the engine's messages and
hands them to the engine, which checks them on every rank together and raises the same
exception on every rank. Reads and ``dset[sel] = x`` are independent: any rank reads or
writes at any time, without communication.

- ``node.py``: what every object shares (``name``, ``attrs``, ``file``, ``parent``).
- ``dataset.py``: ``Dataset``; ``group.py``: ``Group``; ``file.py``: ``File``;
  ``datatype.py``: ``Datatype`` (named types).
"""

from .dataset import Dataset
from .datatype import Datatype
from .file import File
from .group import Group
from .node import AttributeManager

__all__ = ["AttributeManager", "Dataset", "Datatype", "File", "Group"]
