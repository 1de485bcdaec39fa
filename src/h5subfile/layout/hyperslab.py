"""Regular hyperslabs (HDF5's ``start, stride, count, block``) and the runs of writes that make
them (pure): the geometry of the pieces of a dataset whose layout is learned from the writes.

A rank writing a dataset without a declared block may write any boxes in any order; what it
wrote becomes *pieces*, each one VDS mapping and one checksum. A :class:`Run` follows a rank's
writes as they come and grows while each new box continues it: a box grown along an axis
(slabs written one after another), then further blocks of the same shape at a regular step
along one axis (rank r of P writing rows r, r + P, r + 2P, ...), each block possibly written
in several parts in C order (row by row, element by element). A run is then one
:class:`Slab`: one mapping, however many writes made it.

A piece's bytes, for its checksum, are its blocks in C order of their index in the grid, each
block's bytes in C order: the order in which a run is written.

:class:`Slab` also answers the questions of overlap and reads: :meth:`Slab.within` (only the
blocks that meet a box), :func:`slabs_meet` and :func:`first_shared` (two owners' slabs sharing
an element: a sweep, then an exact test per axis), :meth:`Slab.count_in` (how many elements of a
selection, given per axis, a slab holds).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .blocks import Block, Shape


@dataclass(frozen=True)
class Slab:
    """Blocks of shape ``block`` at ``start + index * stride`` for every ``index`` of the grid
    ``count`` (per axis); on an axis where ``count`` is 1 the stride is the block (HDF5's
    regular hyperslab, normalised)."""

    start: Shape
    stride: Shape
    count: Shape
    block: Shape

    @classmethod
    def of_box(cls, box: Block) -> Slab:
        return cls(box.start, tuple(max(n, 1) for n in box.count), (1,) * len(box.count), box.count)

    @classmethod
    def made(
        cls, start: Sequence[int], stride: Sequence[int], count: Sequence[int], block: Sequence[int]
    ) -> Slab:
        """A slab, normalised: the stride of an axis of one block is the block."""
        return cls(
            tuple(start),
            tuple(s if c > 1 else max(b, 1) for s, c, b in zip(stride, count, block)),
            tuple(count),
            tuple(block),
        )

    @property
    def ndim(self) -> int:
        return len(self.start)

    @property
    def blocks_count(self) -> int:
        return math.prod(self.count)

    @property
    def size(self) -> int:
        """Elements selected."""
        return math.prod(self.count) * math.prod(self.block)

    @property
    def is_box(self) -> bool:
        return all(c == 1 for c in self.count)

    @property
    def bounds(self) -> Block:
        """The smallest box holding every block."""
        return Block(
            self.start,
            tuple((c - 1) * s + b for s, c, b in zip(self.stride, self.count, self.block)),
        )

    def block_at(self, index: Sequence[int]) -> Block:
        return Block(
            tuple(a + i * s for a, i, s in zip(self.start, index, self.stride)), self.block
        )

    def blocks(self) -> Iterator[Block]:
        """Every block, in C order of the grid (the order of the piece's bytes)."""
        for index in itertools.product(*(range(c) for c in self.count)):
            yield self.block_at(index)

    def within(self, box: Block) -> list[Block]:
        """The parts of the slab's blocks inside ``box`` (boxes, in the slab's block order);
        only the blocks that meet it are looked at."""
        if self.size == 0 or box.is_empty:
            return []
        if self.ndim == 0:
            return [Block((), ())]
        per_axis = []
        for a in range(self.ndim):
            spans = _axis_spans(
                self.start[a],
                self.stride[a],
                self.count[a],
                self.block[a],
                box.start[a],
                box.stop[a],
            )
            if not spans:
                return []
            per_axis.append(spans)
        return [
            Block(tuple(lo for lo, _ in combo), tuple(hi - lo for lo, hi in combo))
            for combo in itertools.product(*per_axis)
        ]

    def count_in(self, axes: Sequence[range | np.ndarray]) -> int:
        """Elements of the selection ``axes`` (the indices it takes along each axis: a range,
        or increasing unique indices) that the slab holds."""
        total = 1
        for a, taken in enumerate(axes):
            pattern = (self.start[a], self.stride[a], self.count[a], self.block[a])
            if isinstance(taken, range) and taken.step == 1:
                found = _axis_below(pattern, taken.stop) - _axis_below(pattern, taken.start)
            else:
                start, stride, count, block = pattern
                at = np.asarray(taken, dtype=np.int64) - start
                grid = at // stride
                found = int(
                    np.count_nonzero((at >= 0) & (grid < count) & (at - grid * stride < block))
                )
            if not found:
                return 0
            total *= found
        return total

    def holds(self, other: Slab) -> bool:
        """Whether every element of ``other`` is one of this slab's."""
        if other.ndim != self.ndim or not self.bounds.contains(other.bounds):
            return False
        if self.is_box:
            return True  # a box holds all that lies within its bounds
        axes: list[range | np.ndarray] = []
        for s, t, c, b in zip(other.start, other.stride, other.count, other.block):
            if c == 1 or t == b:
                axes.append(range(s, s + (c - 1) * t + b))
            else:
                axes.append((s + t * np.arange(c)[:, None] + np.arange(b)[None, :]).ravel())
        return self.count_in(axes) == other.size

    def shifted(self, origin: Sequence[int]) -> Slab:
        """This slab with its corner measured from ``origin`` (an extent's corner)."""
        return Slab(
            tuple(s - o for s, o in zip(self.start, origin)), self.stride, self.count, self.block
        )

    def describe(self) -> str:
        """``[0:2, 0:4]`` for a box, ``[3:100:8 (block 1), 0:4]`` for a strided slab."""
        parts = []
        for s, st, c, b in zip(self.start, self.stride, self.count, self.block):
            if c == 1:
                parts.append(f"{s}:{s + b}")
            else:
                stop = s + (c - 1) * st + b
                parts.append(f"{s}:{stop}:{st}" + (f" (block {b})" if b != 1 else ""))
        return "[" + ", ".join(parts) + "]"


def _axis_spans(
    start: int, stride: int, count: int, block: int, lo: int, hi: int
) -> list[tuple[int, int]]:
    """The parts of one axis' blocks ``[start + i * stride, + block)``, ``i < count``, inside
    ``[lo, hi)``: only the blocks that meet it."""
    if block == 0 or hi <= lo:
        return []
    first = max(0, -(-(lo - start - block + 1) // stride))
    last = min(count - 1, (hi - 1 - start) // stride)
    spans = []
    for i in range(first, last + 1):
        a = start + i * stride
        b, e = max(a, lo), min(a + block, hi)
        if b < e:
            spans.append((b, e))
    return spans


def _axis_below(pattern: tuple[int, int, int, int], end: int) -> int:
    """How many indices of one axis' blocks ``(start, stride, count, block)`` lie below
    ``end`` (the blocks do not overlap: ``stride >= block``)."""
    start, stride, count, block = pattern
    if end <= start:
        return 0
    grid, into = divmod(end - start, stride)
    if grid >= count:
        return count * block
    return grid * block + min(into, block)


def _axis_meets(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Whether two axis patterns ``(start, stride, count, block)`` share an index."""
    if a[2] > b[2]:
        a, b = b, a
    s1, t1, c1, b1 = a
    s2, t2, c2, b2 = b
    if s1 + (c1 - 1) * t1 + b1 <= s2 or s2 + (c2 - 1) * t2 + b2 <= s1:
        return False
    if c1 == 1 and c2 == 1:
        return True
    if t1 == t2 and c1 > 1 and c2 > 1:  # the same period: compare the phases
        shift = (s2 - s1) % t1
        if not (shift < b1 or shift + b2 > t1):
            return False  # the other's blocks always fall in this one's gaps
    starts = s1 + t1 * np.arange(c1, dtype=np.int64)
    first = np.maximum(0, -(-(starts - s2 - b2 + 1) // t2))
    last = np.minimum(c2 - 1, (starts + b1 - 1 - s2) // t2)
    return bool(np.any(first <= last))


def slabs_meet(a: Slab, b: Slab) -> bool:
    """Whether two slabs share an element (every axis' patterns meet)."""
    if a.size == 0 or b.size == 0:
        return False
    return all(
        _axis_meets(
            (a.start[i], a.stride[i], a.count[i], a.block[i]),
            (b.start[i], b.stride[i], b.count[i], b.block[i]),
        )
        for i in range(a.ndim)
    )


def first_shared(slabs: Sequence[tuple[int, Slab]]) -> tuple[int, int] | None:
    """Indices ``(i, j)``, ``i < j``, of two slabs of different owners (``(owner, slab)``)
    that share an element, or None. A sweep along the axis where the bounds spread most
    leaves only slabs whose bounds meet to be compared exactly."""
    ranked = [(k, owner, slab, slab.bounds) for k, (owner, slab) in enumerate(slabs) if slab.size]
    if len(ranked) < 2:
        return None
    ndim = ranked[0][2].ndim
    if ndim and all(entry[2].is_box for entry in ranked):
        return _first_shared_boxes(
            [(k, owner, bounds.start, bounds.stop) for k, owner, _, bounds in ranked]
        )
    apart = _phases_apart([(entry[0], entry[2]) for entry in ranked])
    axis = max(range(ndim), key=lambda a: len({r[3].start[a] for r in ranked}), default=0)
    ranked.sort(key=lambda r: r[3].start[axis] if ndim else 0)
    active: list[tuple[int, int, Slab, Block]] = []
    for entry in ranked:
        k, owner, slab, bounds = entry
        if ndim:
            active = [e for e in active if e[3].stop[axis] > bounds.start[axis]]
        family = apart.get(k)
        for other, other_owner, seen, seen_bounds in active:
            if other_owner == owner or (family is not None and apart.get(other) == family):
                continue
            if ndim and bounds.intersect(seen_bounds) is None:
                continue
            if slabs_meet(slab, seen):
                first, second = sorted((k, other))
                return first, second
        active.append(entry)
    return None


def _first_shared_boxes(
    boxes: list[tuple[int, int, Shape, Shape]],
) -> tuple[int, int] | None:
    """:func:`first_shared` of boxes (``(index, owner, start, stop)``, none empty), compared as
    plain numbers in the same order: the pieces of ranks' tiles and slabs (a master of 64
    tiles per dataset is checked at every open)."""
    ndim = len(boxes[0][2])
    axis = max(range(ndim), key=lambda a: len({box[2][a] for box in boxes}))
    boxes.sort(key=lambda box: box[2][axis])
    active: list[tuple[int, int, Shape, Shape]] = []
    for k, owner, start, stop in boxes:
        active = [box for box in active if box[3][axis] > start[axis]]
        for other, other_owner, seen_start, seen_stop in active:
            if other_owner != owner and all(
                a < d and c < b for a, b, c, d in zip(start, stop, seen_start, seen_stop)
            ):
                first, second = sorted((k, other))
                return first, second
        active.append((k, owner, start, stop))
    return None


def _phases_apart(slabs: Sequence[tuple[int, Slab]]) -> dict[int, int]:
    """Slabs (``(index, slab)``; by index) proven to share no element with each other
    without comparing them in pairs, each with the number of its family: slabs alike but for
    their start (the same stride, count and block on every axis; ranks writing rows r,
    r + P, ...) whose blocks, on some axis of several blocks, fall at phases of its period
    that never meet."""
    families: dict[tuple[Shape, Shape, Shape], list[int]] = {}
    starts = {}
    for k, slab in slabs:
        families.setdefault((slab.stride, slab.count, slab.block), []).append(k)
        starts[k] = slab.start
    apart: dict[int, int] = {}
    for number, ((stride, count, block), members) in enumerate(families.items()):
        if len(members) < 2:
            continue
        for a in range(len(stride)):
            if count[a] < 2:
                continue
            period, size = stride[a], block[a]
            phases = sorted(starts[k][a] % period for k in members)
            steps = zip(phases, phases[1:] + [phases[0] + period])
            if all(later - earlier >= size for earlier, later in steps):
                apart.update((k, number) for k in members)
                break
    return apart


def merged(slabs: Sequence[Slab]) -> list[Slab]:
    """Fewer slabs selecting exactly the elements of ``slabs`` (disjoint): pieces that together
    make one regular hyperslab become one. Along each axis in turn, last first, two slabs
    alike on every other axis merge where one's blocks end where the other's begin, within
    the same period (ranks writing rows r, r + P, ... side by side; tiles side by side), or
    where one continues the other's progression (a run of blocks at one step); repeated while
    any merge happens. Greedy: the result depends only on the set given, not its order."""
    found = sorted({canonical(s) for s in slabs if s.size}, key=_order)
    if not found:
        return []
    while len(found) > 1:
        before = len(found)
        for axis in reversed(range(found[0].ndim)):
            found = _merge_along(found, axis, _side_by_side)
            found = _merge_along(found, axis, _continued)
        if len(found) == before:
            break
    return found


def canonical(slab: Slab) -> Slab:
    """``slab`` normalised (:meth:`Slab.made`), and an axis of blocks that touch (stride =
    block) made one block: one form for each set of elements a slab can select."""
    count, block = list(slab.count), list(slab.block)
    for a in range(slab.ndim):
        if count[a] > 1 and slab.stride[a] == block[a]:
            block[a] *= count[a]
            count[a] = 1
    return Slab.made(slab.start, slab.stride, count, block)


def _order(slab: Slab) -> tuple[Shape, Shape]:
    return (slab.start, slab.block)


def _others(slab: Slab, axis: int) -> tuple[tuple[int, int, int, int], ...]:
    """``slab`` on every axis but ``axis``: what two slabs must share to merge along it."""
    return tuple(
        (s, t if c > 1 else 0, c, b)
        for a, (s, t, c, b) in enumerate(zip(slab.start, slab.stride, slab.count, slab.block))
        if a != axis
    )


def _merge_along(
    slabs: list[Slab], axis: int, join: Callable[[Slab, Slab, int], Slab | None]
) -> list[Slab]:
    """``slabs`` with each run of them, alike but along ``axis`` and in order along it, that
    ``join`` merges pairwise replaced by their merger."""
    groups: dict[object, list[Slab]] = {}
    for slab in slabs:
        groups.setdefault(_others(slab, axis), []).append(slab)
    if len(groups) == len(slabs):
        return slabs
    result = []
    for alike in groups.values():
        alike.sort(key=lambda s: s.start[axis])
        current = alike[0]
        for slab in alike[1:]:
            joined = join(current, slab, axis)
            if joined is None:
                result.append(current)
                current = slab
            else:
                current = joined
        result.append(current)
    return sorted(result, key=_order)


def _with_axis(slab: Slab, axis: int, stride: int, count: int, block: int) -> Slab:
    """``slab`` with ``axis`` given anew, normalised."""
    return canonical(
        Slab.made(
            slab.start,
            slab.stride[:axis] + (stride,) + slab.stride[axis + 1 :],
            slab.count[:axis] + (count,) + slab.count[axis + 1 :],
            slab.block[:axis] + (block,) + slab.block[axis + 1 :],
        )
    )


def _side_by_side(a: Slab, b: Slab, axis: int) -> Slab | None:
    """``a`` and ``b`` (``b`` later along ``axis``) as one slab where ``b``'s blocks begin
    where ``a``'s end, at the same step: blocks grow."""
    (sa, ta, ca, ba), (sb, tb, cb, bb) = (
        (x.start[axis], x.stride[axis], x.count[axis], x.block[axis]) for x in (a, b)
    )
    if ca != cb or sb != sa + ba or (ca > 1 and (ta != tb or ba + bb > ta)):
        return None
    return _with_axis(a, axis, ta if ca > 1 else ba + bb, ca, ba + bb)


def _continued(a: Slab, b: Slab, axis: int) -> Slab | None:
    """``a`` and ``b`` (``b`` later along ``axis``) as one slab where ``b``'s blocks carry
    on ``a``'s progression (or the two start one at the distance between them): count grows."""
    (sa, ta, ca, ba), (sb, tb, cb, bb) = (
        (x.start[axis], x.stride[axis], x.count[axis], x.block[axis]) for x in (a, b)
    )
    if ba != bb:
        return None
    steps = {t for t, c in ((ta, ca), (tb, cb)) if c > 1}
    step = steps.pop() if len(steps) == 1 else sb - sa if not steps else 0
    if step < ba or sb != sa + ca * step:
        return None
    return _with_axis(a, axis, step, ca + cb, ba)


def c_order_offset(shape: Shape, start: Shape) -> int:
    """The C-order element index of ``start`` inside a box of ``shape``."""
    offset = 0
    for n, s in zip(shape, start):
        offset = offset * n + s
    return offset


def is_run_of(box: Block, outer: Block) -> bool:
    """Whether ``box`` (inside ``outer``) is one contiguous range of ``outer``'s C order."""
    ndim = len(box.count)
    j = ndim - 1
    while j > 0 and box.count[j] == outer.count[j]:
        j -= 1
    if any(c != 1 for c in box.count[:j]):
        return False
    return all(box.start[i] == outer.start[i] for i in range(j + 1, ndim))


class Run:
    """The piece a rank's writes are making, as they come (geometry only; the caller hashes
    the bytes it writes in the same order).

    It starts as one box, which grows while each write continues it in C order along one
    axis; a write of the same shape at a distance along one axis then starts a progression
    of blocks at that step, each block itself written whole or in parts in C order. A write
    that continues none of these is refused (:meth:`extend` returns False): the caller then
    starts a new run.
    """

    __slots__ = ("origin", "block", "axis", "step", "complete", "filled")

    def __init__(self, box: Block):
        self.origin = box.start
        self.block = box.count  # the first block while it grows, then every block's shape
        self.axis = -1  # the axis of the progression (-1: a single block so far)
        self.step = 0
        self.complete = 1  # blocks written whole
        self.filled = 0  # elements of the next block written so far (a C-order prefix)

    @property
    def slab(self) -> Slab:
        """The whole blocks written so far."""
        count = tuple(self.complete if a == self.axis else 1 for a in range(len(self.block)))
        stride = tuple(self.step if a == self.axis else max(n, 1) for a, n in enumerate(self.block))
        return Slab(self.origin, stride, count, self.block)

    @property
    def whole(self) -> bool:
        """No block is partly written: the run is exactly :attr:`slab`."""
        return self.filled == 0

    def next_block(self) -> Block:
        """Where the block after the whole ones is (or would be)."""
        start = tuple(
            o + self.complete * self.step if a == self.axis else o
            for a, o in enumerate(self.origin)
        )
        return Block(start, self.block)

    def extend(self, box: Block) -> bool:
        """Take ``box`` as the run's continuation if it is one; returns whether it was."""
        if box.is_empty or len(box.count) != len(self.block):
            return False
        if self.axis < 0 and self.filled == 0 and self._grow(box):
            return True
        if self.axis < 0:
            return self._second_block(box)
        return self._continue(box)

    def _grow(self, box: Block) -> bool:
        """The first block grows by a box right after it along one axis."""
        first = Block(self.origin, self.block)
        for k in range(len(self.block)):
            if any(self.block[j] != 1 or box.count[j] != 1 for j in range(k)):
                return False  # beyond axis k, C order no longer concatenates
            if box.start[k] != first.stop[k]:
                continue
            same = all(
                box.start[j] == first.start[j] and box.count[j] == first.count[j]
                for j in range(len(self.block))
                if j != k
            )
            if same:
                grown = list(self.block)
                grown[k] += box.count[k]
                self.block = tuple(grown)
                return True
        return False

    def _second_block(self, box: Block) -> bool:
        """A box starting a second block at a distance along one axis."""
        differ = [a for a, (s, o) in enumerate(zip(box.start, self.origin)) if s != o]
        if len(differ) != 1:
            return False
        axis = differ[0]
        step = box.start[axis] - self.origin[axis]
        if step < self.block[axis]:
            return False
        target = Block(box.start, self.block)
        if not target.contains(box) or not is_run_of(box, target):
            return False
        self.axis, self.step = axis, step
        self._fill(box, target)
        return True

    def _continue(self, box: Block) -> bool:
        """A box continuing the block in progress, or starting the next one."""
        target = self.next_block()
        if not target.contains(box) or not is_run_of(box, target):
            return False
        if c_order_offset(self.block, box.relative_to(target.start).start) != self.filled:
            return False
        self._fill(box, target)
        return True

    def _fill(self, box: Block, target: Block) -> None:
        self.filled += box.size
        if self.filled == target.size:
            self.complete += 1
            self.filled = 0

    def partial(self) -> list[Block]:
        """The written part of the block in progress, as boxes (empty when :attr:`whole`)."""
        if self.filled == 0:
            return []
        return prefix_boxes(self.next_block(), self.filled)


def prefix_boxes(box: Block, elements: int) -> list[Block]:
    """The first ``elements`` of ``box`` in C order, as at most ``ndim`` disjoint boxes."""
    if not box.count:
        return [box] if elements else []
    found = []
    start = list(box.start)
    left = elements
    for axis in range(len(box.count)):
        inner = math.prod(box.count[axis + 1 :])
        rows = left // inner
        if rows:
            count = [1] * axis + [rows] + list(box.count[axis + 1 :])
            found.append(Block(tuple(start), tuple(count)))
            start[axis] += rows
            left -= rows * inner
        if left == 0:
            break
    return found
