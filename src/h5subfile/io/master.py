"""The master file as rank 0 writes it during a write session (groups, attributes, VDS, layout
records, atomic commit); how readers scan it is :mod:`.master_read`.

:meth:`MasterWriter.publish_dataset` writes a dataset's VDS and layout record; the session
ends with an atomic commit (the master written as ``NAME.h5.partial``, then renamed), except
an append to a master larger than ``H5SUBFILE_MASTER_COPY_LIMIT`` (it holds raw data): that
master is changed in place, after room for HDF5's metadata is reserved
(:data:`IN_PLACE_RESERVE`), so that a full disk fails the append before the master changes.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import posixpath
import shutil
from collections.abc import Iterable
from typing import Any

import h5py
import numpy as np

from ..errors import CorruptFileError, FileExistsH5SubfileError, MissingFileError
from ..layout.catalog import STEPS_KEY, Catalog, Link, NodeInfo
from ..layout.hyperslab import merged
from ..layout.names import SUBFILE_NAME, names_master, partial_path, subfile_folder
from ..layout.record import (
    LAYOUT_ATTR,
    MERGED_FORMAT,
    ROOT_ATTR,
    DatasetLayout,
    FileRecord,
    Session,
)
from ..profiler.counters import Profile
from ..profiler.reduction import record_id
from . import image
from .attributes import set_attribute
from .causes import close_hdf5, hdf5_writes, hdf5_writing, let_go, os_error, reserve_space
from .claim import Claim
from .h5 import (
    META_BLOCK_SIZE,
    Mapped,
    SourceFile,
    compact_selections,
    copy_attributes,
    create_file,
    create_virtual_dataset,
    open_file_rw,
    whole_sources,
    write_text_attr,
)
from .master_read import scan
from .objects import (
    Groups,
    commit_type,
    creation_properties,
    fill_array,
    h5py_link,
    tracks_order,
)
from .posix import block_size, fsync_path
from .references import as_references

COPY_LIMIT_ENV = "H5SUBFILE_MASTER_COPY_LIMIT"
#: A master up to this size is copied and replaced atomically when appended to; a larger one
#: (it holds raw data) is changed in place under an open-session marker.
DEFAULT_COPY_LIMIT = 64 * 2**20
#: Bytes an in-place append reserves after the master's end before HDF5 opens it: room for
#: the session's first metadata (its record), however full the disk (docs/FORMAT.md, *Commit*).
IN_PLACE_RESERVE = 2**20


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def remove_subfiles(folder: str, session: int | None = None) -> None:
    """Delete h5subfile's subfiles in ``folder`` (all, or those of one session)."""
    if not os.path.isdir(folder):
        return
    for name in os.listdir(folder):
        match = SUBFILE_NAME.match(name)
        if match and (session is None or int(match.group(1)) == session):
            os.remove(os.path.join(folder, name))
    if session is None:
        try:
            os.rmdir(folder)
        except OSError:
            pass  # not empty: files that are not ours stay


class MasterWriter(SourceFile):
    """Rank 0's handle on the master during a write session.

    Commit strategies: ``replace`` (the master is written as ``NAME.h5.partial``, for an append
    as a copy of the old master, and renamed over ``NAME.h5`` at close: a crash leaves the old
    file untouched) and ``in-place`` (an append to a master larger than the copy limit: changes
    go into it directly, and the session stays marked open until close, so a crash is reported
    and the datasets of the unfinished session refuse to be read).

    It is made under the session's ``claim`` (:mod:`.claim`), taken before anything here
    touches the master, its ``.partial`` copy or a subfile, and released by :meth:`commit` and
    :meth:`abandon`; the caller releases it when this constructor fails.
    """

    def __init__(
        self,
        path: str,
        mode: str,
        session_info: dict[str, Any],
        claim: Claim,
        alignment: int | None = None,
        profile: Profile | None = None,
        known: Catalog | None = None,
        track_order: bool = False,
    ):
        """``known``: the catalogue of the master as this process just committed it (the
        next session of the same open file, ``File.commit``), so that it is not scanned again.
        ``track_order``: a master created now keeps its root group's creation order."""
        self.claim = claim
        self.profile = profile
        self.path = os.path.abspath(path)
        self.partial = partial_path(self.path)
        self.folder = subfile_folder(self.path)
        self.h5, created = self._open(mode, alignment, track_order)
        try:
            with hdf5_writing(self.path, "write"):
                if created:
                    root = NodeInfo("group", track_order=track_order)
                    self.catalog = Catalog({"/": root}, FileRecord())
                elif known is not None:
                    self.catalog = known
                else:
                    self.catalog = scan(self.h5, self.path, self.data_path, self.profile)
                self._begin(mode, session_info)
        except BaseException:
            let_go(self.h5)  # the caller releases the claim
            raise

    def _open(
        self, mode: str, alignment: int | None, track_order: bool = False
    ) -> tuple[h5py.File, bool]:
        """The master's HDF5 file for this session and whether it is new; and how it is
        committed: a new file (as ``.partial``), a copy (``.partial``) or the master itself
        (in place, once room for HDF5's metadata is reserved after its end, so that a full
        disk is said before the master changes: docs/FORMAT.md, *Commit*)."""
        exists = os.path.exists(self.path)
        if mode in ("w-", "x") and exists:
            raise FileExistsH5SubfileError(
                f"{self.path} exists (mode {mode!r} refuses to replace it)"
            )
        if mode == "r+" and not exists:
            raise MissingFileError(f"{self.path} does not exist (mode 'r+' needs an existing file)")
        if os.path.exists(self.partial):
            os.remove(self.partial)  # left by a crashed session: never part of the file
        self.commit_mode, self.data_path = "replace", self.partial
        if mode == "w" or not exists:
            if exists:
                os.remove(self.path)
            remove_subfiles(self.folder)
            with hdf5_writing(self.path, "create"):
                created = create_file(
                    self.partial, alignment, META_BLOCK_SIZE, self.profile, track_order
                )
                return created, True
        if not h5py.is_hdf5(self.path):
            raise CorruptFileError(f"{self.path} is not an HDF5 file; cannot append to it")
        limit = int(os.environ.get(COPY_LIMIT_ENV, DEFAULT_COPY_LIMIT))
        size = None
        if os.path.getsize(self.path) <= limit:
            self._copy()
        else:
            self.commit_mode, self.data_path = "in-place", self.path
            size = reserve_space(self.path, IN_PLACE_RESERVE, "append to")
        try:
            with hdf5_writing(self.path, "append to"):
                return open_file_rw(self.data_path, alignment, self.profile), False
        except BaseException:
            if size is not None:
                os.truncate(self.path, size)  # the room, never written by HDF5
            raise

    def _copy(self) -> None:
        """The ``.partial`` copy of the master a replacing append writes (removed when the
        copy fails: a full disk gets its room back)."""
        try:
            shutil.copyfile(self.path, self.partial)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(self.partial)
            raise os_error(exc, self.path, "append to") from exc

    def _begin(self, mode: str, session_info: dict[str, Any]) -> None:
        """The session's record, in the catalogue and, appending in place, in the master."""
        self.groups = Groups(self.h5, keep_made=True)
        #: whether :meth:`commit` has published the master (renamed, or closed in place)
        self.published = False
        #: virtual datasets of learned layouts, made at close (:meth:`map_pieces`): by path,
        #: (shape, dtype, maxshape, fill value)
        self.pending: dict[str, tuple[Any, ...]] = {}
        #: hard links made by the program, made at the commit (:meth:`link`): path -> target
        self.hard_links: dict[str, str] = {}
        #: names objects lose at the commit (:meth:`unname`)
        self.unnamed: list[str] = []
        #: attributes holding object references, written at the commit (:meth:`set_ref_attr`)
        self.ref_attrs: dict[tuple[str, str], Any] = {}
        #: the objects the file held when the session began: appending in place, those made
        #: since are unlinked again if the session is abandoned (:meth:`abandon`)
        self.existing = frozenset(self.catalog.nodes) if self.commit_mode == "in-place" else None
        record = self.catalog.record
        self.session = Session(
            id=len(record.sessions),
            mode=mode,
            started=now(),
            commit=self.commit_mode,
            uuid=self.claim.session,
            **session_info,
        )
        record.sessions.append(self.session)
        if self.claim.recovered:
            self.catalog.problems.append(self.claim.recovered)
            self.claim.recovered = None  # said once, not again by the next session of a commit
        remove_subfiles(self.folder, self.session.id)  # orphans of a crashed session
        if self.commit_mode == "in-place":
            self._write_record()
            self.h5.flush()

    @hdf5_writes("write")
    def _write_record(self) -> None:
        write_text_attr(self.h5, ROOT_ATTR, self.catalog.record.to_json())

    # structure -----------------------------------------------------------------------------
    @hdf5_writes("write")
    def create_group(self, path: str) -> None:
        self.groups.require(path)

    @hdf5_writes("write")
    def set_attr(
        self, path: str, name: str, value: Any, data: Any = None, new: bool = False
    ) -> None:
        """Attribute ``name`` of ``path`` set to ``value`` (``data`` and ``new``: as
        :func:`~.attributes.set_attribute` takes them)."""
        if self.pending:
            self._make_pending(path)
        if self.ref_attrs:
            self.ref_attrs.pop((path, name), None)
        if not set_attribute(self.groups.object_id(path), name, value, data, new):
            self.h5[path].attrs[name] = value  # h5py's own way for all but plain values

    def set_ref_attr(self, path: str, name: str, value: Any) -> None:
        """Attribute ``name`` of ``path`` set to object references (``ObjectRef``, or an
        array of them), written at the commit, once every object is final (a learned
        dataset's virtual dataset is made at close: a reference made before would point at
        the dataset it replaces)."""
        self.ref_attrs[(path, name)] = value

    @hdf5_writes("write")
    def _write_ref_attrs(self) -> None:
        """The reference attributes :meth:`set_ref_attr` kept; a reference to an object
        deleted since points nowhere (the null reference: HDF5's would dangle)."""
        for (path, name), value in self.ref_attrs.items():
            self._make_pending(path)
            self.h5[path].attrs[name] = as_references(self.h5, value, self._make_pending)
        self.ref_attrs.clear()

    @hdf5_writes("write")
    def delete_attr(self, path: str, name: str) -> None:
        self._make_pending(path)
        pending = self.ref_attrs.pop((path, name), None)
        if pending is None or h5py.h5a.exists(self.groups.object_id(path), name.encode()):
            h5py.h5a.delete(self.groups.object_id(path), name.encode())

    @hdf5_writes("write")
    def make_scale(self, path: str, name: str | bytes) -> None:
        self._make_pending(path)
        image.set_scale(self.h5[path], name)

    @hdf5_writes("write")
    def attach_scale(self, path: str, dim: int, scale: str) -> None:
        self._linked()
        self._make_pending(path)
        self._make_pending(scale)
        image.attach_scale(self.h5[path], dim, self.h5[scale])

    @hdf5_writes("write")
    def detach_scale(self, path: str, dim: int, scale: str) -> None:
        self._linked()
        image.detach_scale(self.h5[path], dim, self.h5[scale])

    @hdf5_writes("write")
    def set_label(self, path: str, dim: int, label: str) -> None:
        self._make_pending(path)
        image.set_label(self.h5[path], dim, label)

    @hdf5_writes("write")
    def link(self, path: str, link: Link) -> None:
        """A soft or external link, made now; a hard link is made at the commit, when its
        object's storage is final (a learned dataset's virtual dataset is made at close)."""
        self._linked()
        parent = self.groups.parent_of(path)  # made now: the program may use it at once
        if link.kind == "hard":
            self.hard_links[path] = link.target
        else:
            parent[posixpath.basename(path)] = h5py_link(link)

    @hdf5_writes("write")
    def move_link(self, path: str, new: str) -> None:
        """A link renamed (a hard link not made yet: where it will be made)."""
        self._linked()
        if path in self.hard_links:
            self.hard_links[new] = self.hard_links.pop(path)
            self.groups.parent_of(new)
            return
        self.groups.parent_of(new)
        self.h5.move(path, new)

    def _make_hard_links(self) -> None:
        for path, target in self.hard_links.items():
            self._make_pending(target)
            self.groups.parent_of(path)[posixpath.basename(path)] = self.h5[target]
        self.hard_links.clear()

    @hdf5_writes("write")
    def commit_type(self, path: str, dtype: np.dtype) -> None:
        """A named type (h5py's ``group[name] = dtype``), made now."""
        commit_type(self.groups, path, dtype)

    def unname(self, path: str) -> None:
        """The object ``path`` loses that name at the commit, once its other names (hard
        links, made then) hold it; until then the master keeps it there, where rank 0 keeps
        making what the session asks of it."""
        self._linked()
        self.unnamed.append(path)

    def _drop_names(self) -> None:
        for path in sorted(self.unnamed, key=lambda p: p.count("/"), reverse=True):
            del self.h5[path]
            self.groups.forget(path)
        self.unnamed.clear()

    def delete(self, path: str) -> None:
        """A group or dataset deleted by the program: its storage in the master set aside
        until the commit (writes to it may be in flight), its pending virtual datasets gone."""
        self._linked()
        self.set_aside([path])
        self.unlink(path)

    def replace_unfinished(self, path: str) -> None:
        """Unlink a dataset left by an unfinished session so that its name can be reused."""
        self.unlink(path)

    @hdf5_writes("write")
    def unlink(self, path: str) -> None:
        """Remove a group or dataset from the master, if it is there (data it points to in
        subfiles stays on disk, unreferenced)."""
        below = path.rstrip("/") + "/"
        for hard, target in list(self.hard_links.items()):
            if hard == path or hard.startswith(below) or target == path or target.startswith(below):
                del self.hard_links[hard]  # a link in it, or to what goes
        self.unnamed[:] = [p for p in self.unnamed if p != path and not p.startswith(below)]
        for typed in [p for p in self.groups.typed if p == path or p.startswith(below)]:
            del self.groups.typed[typed]
        for key in [k for k in self.ref_attrs if k[0] == path or k[0].startswith(below)]:
            del self.ref_attrs[key]
        with contextlib.suppress(KeyError):  # not there (yet): a pending dataset
            del self.h5[path]
        self.groups.forget(path)
        for pending in [p for p in self.pending if p == path or p.startswith(below)]:
            del self.pending[pending]

    def unlink_empty_groups(self, paths: Iterable[str]) -> None:
        """Remove those of the groups ``paths`` that hold nothing, deepest first."""
        for path in sorted(paths, key=lambda p: p.count("/"), reverse=True):
            group = self.h5.get(path)
            if isinstance(group, h5py.Group) and not len(group):
                self.unlink(path)

    # datasets ------------------------------------------------------------------------------
    @hdf5_writes("write")
    def publish_dataset(
        self,
        path: str,
        shape: tuple[int, ...],
        dtype: np.dtype,
        layout: DatasetLayout,
        virtual: bool = False,
        fill: bytes | None = None,
    ) -> None:
        """Record a dataset whose sources exist: a VDS over its subfile extents (a dataset
        stored in the master exists already; one that no rank writes reads as fill values),
        and its layout record. ``virtual``: a dataset
        whose layout is learned from the writes, stored in subfiles: a virtual dataset with
        no mapping yet (each piece becomes one at close, :meth:`map_pieces`), of the
        dataset's maximum shape and ``fill`` value."""
        extents = layout.extents
        if virtual:
            # made at close, once its pieces are known (map_pieces); now only if an attribute
            # is set on it in the meantime (_make_pending)
            self.pending[path] = (shape, dtype, layout.maxshape, fill_array(dtype, fill))
            self.groups.parent_of(path)  # its groups exist now, for their attributes
        elif not extents:
            self.groups.parent_of(path).create_dataset(
                posixpath.basename(path),
                shape=shape,
                dtype=dtype,
                dcpl=creation_properties(h5py.h5p.DATASET_CREATE, path in self.groups.tracked),
            )
        elif not all(names_master(e.file) for e in extents):
            sources = whole_sources([(e.file, e.dataset, e.start, e.shape) for e in extents])
            create_virtual_dataset(self.groups, path, shape, dtype, sources)
        if self.commit_mode == "in-place" or not extents:
            self._make_pending(path)
            # Written now only where it is needed before the close: a master changed in place
            # (its readers see every object at once) or a dataset with no extent, which the
            # close does not record again; the others' records, with their checksums, are
            # written once, when the session closes (engine/integrity.record).
            self.write_layout(path, layout)

    def _make_pending(self, path: str) -> None:
        """A virtual dataset not made yet (its layout is learned), made now without mappings
        (an attribute is set on it before its pieces are known)."""
        made = self.pending.pop(path, None)
        if made is not None:
            shape, dtype, maxshape, fill = made
            create_virtual_dataset(self.groups, path, shape, dtype, [], maxshape, fill)

    @hdf5_writes("write")
    def map_pieces(self, path: str, shape: tuple[int, ...], layout: DatasetLayout) -> None:
        """A dataset whose layout was learned, once its pieces are known (close, commit): its
        virtual dataset made with one mapping per run of pieces of a source that together make
        one regular hyperslab (:func:`.hyperslab.merged`), made again, its attributes kept,
        when one was made for attributes set before."""
        sources: list[Mapped] = [
            (e.file, e.dataset, slab, e.start, e.shape)
            for e in layout.extents
            for slab in merged([piece.slab for piece in e.pieces])
        ]
        if len(sources) < sum(len(e.pieces) for e in layout.extents):
            record = self.catalog.record  # a reader of format 5 expects a mapping per piece
            record.format = max(record.format, MERGED_FORMAT)
        maxshape = layout.maxshape or None
        made = self.pending.pop(path, None)
        if made is not None:
            _, dtype, _, fill = made
            create_virtual_dataset(self.groups, path, shape, dtype, sources, maxshape, fill)
            return
        old = self.h5[path]
        parent = self.groups.parent_of(path)
        name = posixpath.basename(path)
        scratch = f"{name}.h5subfile-mapping"
        scratch_path = f"{parent.name.rstrip('/')}/{scratch}"
        if path in self.groups.tracked or tracks_order(old):
            self.groups.tracked.add(scratch_path)
        kind = old.id.get_type()
        if kind.committed():  # a named type's dataset stays one
            self.groups.typed[scratch_path] = (h5py.h5i.get_name(kind) or b"").decode()
        fill_value = np.asarray(old.fillvalue, dtype=old.dtype)
        create_virtual_dataset(
            self.groups, scratch_path, shape, old.dtype, sources, maxshape, fill_value
        )
        # Dimension scales point at objects: detached from the old dataset, attached again
        # to the new one (their references would otherwise point at the deleted dataset).
        own, users = image.attachments(old)
        for dim, scale in own:
            image.detach_scale(old, dim, self.h5[scale])
        for user, dim in users:
            image.detach_scale(self.h5[user], dim, old)
        copy_attributes(old, parent[scratch])
        del parent[name]
        parent.move(scratch, name)
        self.groups.forget(path)  # made again
        new = self.h5[path]
        for dim, scale in own:
            image.attach_scale(new, dim, self.h5[scale])
        for user, dim in users:
            image.attach_scale(self.h5[user], dim, new)

    def mapping(self) -> contextlib.AbstractContextManager[None]:
        """Around the making of several virtual datasets (a creation call's, the close's): the
        compact form of their mappings, set up once for all (:func:`.h5.compact_selections`)."""
        return compact_selections(self.h5)

    @property
    def unmapped(self) -> list[str]:
        """Virtual datasets of learned layouts not made yet (:meth:`map_pieces` makes them)."""
        return list(self.pending)

    @hdf5_writes("write")
    def write_layout(self, path: str, layout: DatasetLayout) -> None:
        write_text_attr(self.groups.object_id(path), LAYOUT_ATTR, layout.to_json())

    # commit --------------------------------------------------------------------------------
    @hdf5_writes("write")
    def commit(
        self, subfiles: list[str], fsync: bool, steps: list[str], keep_claim: bool = False
    ) -> None:
        """Close the session and publish the master (atomically, for ``replace``), recording
        the ``steps`` (top-level groups) it completed. ``keep_claim``: the claim stays held,
        for the next session of the same open file (``File.commit``)."""
        self._linked()  # hard links and names change below
        self.session.subfiles = subfiles
        self.session.extra[STEPS_KEY] = steps
        self.session.closed = now()
        self.drop_set_aside()
        self._make_hard_links()
        self._write_ref_attrs()
        self._keep_creation_order()
        self._drop_names()
        self._write_record()
        if fsync:  # the subfiles' names in their folder, durable before the master names them
            for folder in sorted({os.path.dirname(name) for name in subfiles}):
                fsync_path(os.path.join(os.path.dirname(self.path), folder), self.profile)
        close_hdf5(self.h5, self.path)
        # A killed job cannot break the rename (the page cache survives it); fsync (the plan's
        # option) adds durability against power loss: data before the rename, rename after.
        if fsync:
            fsync_path(self.data_path, self.profile)
        if self.commit_mode == "replace":
            os.replace(self.partial, self.path)
        self.published = True  # readers see the new master from here on
        if self.commit_mode == "replace":
            if self.profile is not None:
                source = self.profile.record(os.path.abspath(self.partial))
                target = self.profile.record(os.path.abspath(self.path))
                source.record_rename_to(
                    target, int(record_id(os.path.abspath(self.partial)), 16), block_size(self.path)
                )
            if fsync:
                fsync_path(os.path.dirname(self.path), self.profile)
        if not keep_claim:
            self.claim.release()

    @hdf5_writes("write")
    def _keep_creation_order(self) -> None:
        """Groups that keep their members' creation order (``track_order``) list them as the
        program created them: a dataset whose virtual dataset HDF5 made later (at close, once
        its pieces are known, or at its first attribute) is moved back into place, with every
        member after it (HDF5 lists a moved link last)."""
        for path, node in self.catalog.nodes.items():
            if node.kind != "group" or not node.track_order:
                continue
            group = self.h5[path]
            have = list(group)
            want = [name for name in self.catalog.children(path) if name in group]
            wanted = set(want)
            have = [name for name in have if name in wanted]
            first = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), len(want))
            for name in want[first:]:
                group.move(name, f"{name}.h5subfile-order")
                group.move(f"{name}.h5subfile-order", name)

    def _linked(self) -> None:
        """The session changes links or references between objects (scales, links, moves,
        deletions, the commit's names): what it made may be what an older object points at
        or is named by, so an abandon leaves it (:meth:`_unmake` does nothing)."""
        self.existing = None

    def _unmake(self) -> None:
        """Unlink the objects this in-place session made, best effort, where it only made
        objects and set attributes (:meth:`_linked`): HDF5 frees their storage when the file
        closes, and gives the end of the file back to the disk (an append that failed on a full
        disk left it full, so that no later append could start). Readers skip them anyway: the
        session never closed."""
        if self.existing is None:
            return
        made = [p for p in self.catalog.nodes if p not in self.existing and p != "/"]
        made += [p for p in self.pending if p not in self.catalog.nodes]
        top = sorted(p for p in made if posixpath.dirname(p) not in made)
        for path in top:
            self.groups.forget(path)  # its identifiers closed: HDF5 frees it with the last
        for path in top:
            with contextlib.suppress(Exception):
                if path in self.h5:
                    del self.h5[path]

    def abandon(self) -> None:
        """Close without publishing (after a failure on some rank): the old file stays as it was
        (HDF5 lets go of it even when its close fails: a later open starts afresh), and the
        ``.partial`` copy, never part of the file, is removed (a full disk gets its room back).
        A master appended to in place keeps the session's marker, but not the objects the
        session made (:meth:`_unmake`): their room goes back to the disk."""
        if self.commit_mode == "in-place" and not self.published:
            self._unmake()
        let_go(self.h5)
        if self.commit_mode == "replace" and not self.published:
            with contextlib.suppress(OSError):
                os.remove(self.partial)
        self.claim.release()
