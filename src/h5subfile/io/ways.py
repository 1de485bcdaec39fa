"""How each write call of a write-behind session (``async_writes``) goes (:class:`Ways`):
directly, in the caller (``direct``); behind, from a copy the call makes into the queue's ring
(``copy``); or behind, from the caller's arrays (``zero_copy``, the plan's ``async_zero_copy``).

Writing behind pays only when the caller is away from its writes long enough for them to be
written meanwhile (its computation), and when handing the bytes over costs the caller less
than writing them: on storage as fast as memory (a page cache) a copy costs half a write or
more, and a copied step that the caller does not leave time to write is paid twice. So each
call picks the way that looks cheapest to the caller from what this rank measured so far, as
decayed averages per byte (:data:`DECAY`), so that the choice follows a change of storage or
of pattern:

- a write's cost: this rank's direct calls, and the queue's background writes;
- handing over's cost: the call's own time writing behind, waiting for room left out (the
  copy, or zero copy's sample check);
- the caller's time away from its writes, per byte it writes (its computation).

Writing directly costs the call's bytes and, first, the writes still queued (they come first).
Writing behind costs the hand-over, and what of the queued writes and the call's own the
caller's next absence cannot hide (it waits for them later: for room, or at close).
Writing behind is chosen when it looks cheaper by a margin (:data:`MARGIN`: in a tie, the
simpler way). Before anything is measured, a call writes behind: a copy only once the ring is
faulted in (``ready``; :meth:`~.writebehind.WriteBehind.prepare` does it in the background).
The plan's ``async_always`` skips the choice: every call writes behind.

:meth:`Ways.summary` counts the calls and bytes of each way; close records it in the session's
entry (``extra["write_behind"]``, shown by ``info``), and a profile times each way as a phase
(:attr:`Ways.totals`: the caller's seconds in the calls that went that way).
"""

from __future__ import annotations

import time
from collections.abc import Callable

DIRECT, COPY, ZERO_COPY = "direct", "copy", "zero_copy"
WAYS = (DIRECT, COPY, ZERO_COPY)

#: Each new measure weighs 1 - DECAY of a decayed average: about the last five calls count.
DECAY = 0.8
#: Writing behind is chosen when its estimated cost is below this share of writing directly's.
MARGIN = 0.9


class Rate:
    """A decayed average of seconds per byte."""

    __slots__ = ("seconds", "nbytes")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.nbytes = 0.0

    def add(self, seconds: float, nbytes: int) -> None:
        if nbytes > 0:
            self.seconds = self.seconds * DECAY + max(seconds, 0.0)
            self.nbytes = self.nbytes * DECAY + nbytes

    @property
    def per_byte(self) -> float | None:
        return self.seconds / self.nbytes if self.nbytes else None


class Ways:
    """The choice of one rank's write-behind session (see the module's docstring).

    ``behind``: the way writing behind takes (:data:`COPY` or :data:`ZERO_COPY`);
    ``always``: every call writes behind (the plan's ``async_always``).
    """

    def __init__(
        self, behind: str, always: bool = False, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        if behind not in (COPY, ZERO_COPY):
            raise ValueError(f"write-behind way {behind!r}: expected {COPY!r} or {ZERO_COPY!r}")
        self.behind = behind
        self.always = always
        self.clock = clock
        self.write = Rate()  # a write's own time (direct, or in the background)
        self.handover = Rate()  # the caller's time handing bytes over (behind)
        self.away = Rate()  # the caller's time away from its writes, per byte it writes
        self.returned: float | None = None  # when the last call returned
        self._counts: dict[str, list[int]] = {way: [0, 0] for way in WAYS}
        #: for the session's profile: each way's calls and the caller's seconds in them
        self.totals: dict[str, tuple[int, float]] = {}

    def choose(self, nbytes: int, queued: int, ready: bool = True) -> str:
        """The way of a call writing ``nbytes`` while ``queued`` bytes wait to be written
        (``ready``: a copy has its ring faulted in)."""
        now = self.clock()
        if self.returned is not None:
            self.away.add(now - self.returned, nbytes)
        if self.always:
            return self.behind
        if self.behind == COPY and not ready:
            return DIRECT
        write, handover, away = self.write.per_byte, self.handover.per_byte, self.away.per_byte
        if write is None or handover is None or away is None:
            return self.behind  # not measured yet: try writing behind
        direct = (queued + nbytes) * write
        behind = nbytes * handover + max(0.0, direct - nbytes * away)
        return self.behind if behind < MARGIN * direct else DIRECT

    def called(self, way: str, nbytes: int, seconds: float) -> None:
        """A call went ``way``, writing ``nbytes`` in ``seconds`` of the caller's time
        (writing behind: waiting for room left out)."""
        (self.write if way == DIRECT else self.handover).add(seconds, nbytes)
        counts = self._counts[way]
        counts[0] += 1
        counts[1] += nbytes
        calls, spent = self.totals.get(way, (0, 0.0))
        self.totals[way] = (calls + 1, spent + seconds)
        self.returned = self.clock()

    def wrote(self, nbytes: int, seconds: float) -> None:
        """The queue wrote ``nbytes`` in the background in ``seconds``."""
        self.write.add(seconds, nbytes)

    def summary(self) -> dict[str, dict[str, int]]:
        """The calls and bytes of each way taken since the last summary (then forgotten)."""
        found = {
            way: {"calls": calls, "bytes": nbytes}
            for way, (calls, nbytes) in self._counts.items()
            if calls
        }
        self._counts = {way: [0, 0] for way in WAYS}
        return found


def merged(summaries: list[dict[str, dict[str, int]] | None]) -> dict[str, dict[str, int]]:
    """Several ranks' summaries, summed."""
    total: dict[str, dict[str, int]] = {}
    for summary in summaries:
        for way, counts in (summary or {}).items():
            into = total.setdefault(way, {"calls": 0, "bytes": 0})
            into["calls"] += counts["calls"]
            into["bytes"] += counts["bytes"]
    return {way: total[way] for way in WAYS if way in total}
