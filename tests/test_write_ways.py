"""Writing behind chooses, call by call, the way that costs the caller least (io/ways.py): a
writer slower than a copy, with time to hide it, makes the calls write behind; a writer faster
than a copy makes them write directly. The choice is recorded in the session's entry and shown
by ``info``; either way the file holds every byte passed (plain h5py, another process)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import run_cli, run_python
from h5subfile.io.ways import COPY, DIRECT, MARGIN, ZERO_COPY, Ways, merged

WRITER = """
import sys, time, numpy as np, h5subfile as hs
from h5subfile.io import posix, writebehind
from mpi4py import MPI

path, slow = sys.argv[1], sys.argv[2]
SLEEP = 0.02
if slow == "writer":  # every positioned write of data takes 20 ms more
    for name in ("write_pieces", "write_hashed"):
        plain = getattr(posix.RawFile, name)
        def slowed(self, *args, _plain=plain, **kwargs):
            time.sleep(SLEEP)
            return _plain(self, *args, **kwargs)
        setattr(posix.RawFile, name, slowed)
else:  # every copy into the ring takes 20 ms more
    copied = writebehind._copied
    def slowed_copy(*args):
        time.sleep(SLEEP)
        return copied(*args)
    writebehind._copied = slowed_copy
with hs.File(path, "w", comm=MPI.COMM_SELF, subfiles=1, async_writes=True,
             async_buffer_size="4m") as f:
    for step in range(12):
        f.write_dataset(f"s{step}", np.arange(1 << 17, dtype="f8") + step)  # 1 MiB
        time.sleep(0.05)  # the caller computes
"""


def _ways(path: Path) -> dict[str, dict[str, int]]:
    with h5py.File(path, "r") as f:
        record = json.loads(f.attrs["h5subfile"])
    return record["sessions"][-1]["extra"]["write_behind"]


@pytest.mark.parametrize(("slow", "chosen"), [("writer", COPY), ("copy", DIRECT)])
def test_the_cheaper_way_is_chosen_recorded_and_shown(
    tmp_path: Path, slow: str, chosen: str
) -> None:
    path = tmp_path / "x.h5"
    written = run_python(WRITER, str(path), slow)
    assert written.returncode == 0, written.stderr
    with h5py.File(path, "r") as f:  # plain h5py: every step as passed
        for step in range(12):
            assert np.array_equal(f[f"s{step}"][...], np.arange(1 << 17, dtype="f8") + step)
    ways = _ways(path)
    assert sum(w["calls"] for w in ways.values()) == 12
    assert sum(w["bytes"] for w in ways.values()) == 12 << 20
    # the first calls measure (a copy waits for its ring, then writing behind is tried)
    assert ways.get(chosen, {}).get("calls", 0) >= 8, ways
    shown = run_cli(1, "info", path)
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if "write-behind:" in x)
    said = "behind from a copy" if chosen == COPY else "written directly"
    assert f"{ways[chosen]['calls']} call(s) {said}" in line, line
    assert run_cli(1, "verify", path).returncode == 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(ways: Ways, clock: Clock, write: float, handover: float, away: float) -> list[str]:
    """Eight calls of 1 MB: a write costs ``write`` s, handing over ``handover`` s, and the
    caller is away ``away`` s between calls; the ways taken."""
    taken = []
    for _ in range(8):
        way = ways.choose(10**6, queued=0)
        taken.append(way)
        if way == DIRECT:
            clock.now += write
            ways.called(way, 10**6, write)
        else:
            clock.now += handover
            ways.called(way, 10**6, handover)
            ways.wrote(10**6, write)
        clock.now += away
    return taken


@pytest.mark.parametrize("behind", [COPY, ZERO_COPY])
def test_ways_write_behind_when_the_writes_can_hide(behind: str) -> None:
    clock = Clock()
    taken = _run(Ways(behind, clock=clock), clock, write=0.1, handover=0.02, away=0.2)
    assert taken == [behind] * 8


def test_ways_write_directly_when_a_copy_costs_as_much_as_a_write() -> None:
    clock = Clock()
    taken = _run(Ways(COPY, clock=clock), clock, write=0.05, handover=0.05, away=0.2)
    assert taken[0] == COPY and taken[1:] == [DIRECT] * 7  # tried once, then measured


def test_ways_write_directly_when_the_caller_is_never_away() -> None:
    """Calls back to back leave the background no time: handing over is paid on top."""
    clock = Clock()
    taken = _run(Ways(ZERO_COPY, clock=clock), clock, write=0.1, handover=0.001, away=0.0)
    assert taken[2:] == [DIRECT] * 6


def test_ways_direct_cost_counts_the_queue_and_ties_go_direct() -> None:
    clock = Clock()
    ways = Ways(COPY, clock=clock)
    ways.called(COPY, 10**6, 0.01)
    ways.wrote(10**6, 0.1)
    clock.now += 0.2
    assert ways.choose(10**6, queued=0) == COPY
    # writing behind looks exactly as costly as writing directly: direct (MARGIN)
    tie = Ways(COPY, clock=clock)
    tie.called(COPY, 10**6, 0.1 * MARGIN)
    tie.wrote(10**6, 0.1)
    assert tie.choose(10**6, queued=0) == DIRECT


def test_ways_copy_waits_for_its_ring_and_always_skips_the_choice() -> None:
    assert Ways(COPY).choose(1, queued=0, ready=False) == DIRECT
    assert Ways(ZERO_COPY).choose(1, queued=0, ready=False) == ZERO_COPY
    clock = Clock()
    always = Ways(COPY, always=True, clock=clock)
    assert _run(always, clock, write=0.01, handover=1.0, away=0.0) == [COPY] * 8
    with pytest.raises(ValueError, match="write-behind way"):
        Ways(DIRECT)


def test_summaries_count_each_way_and_merge_over_ranks() -> None:
    ways = Ways(COPY)
    ways.called(COPY, 100, 0.1)
    ways.called(DIRECT, 50, 0.1)
    ways.called(COPY, 10, 0.1)
    first = ways.summary()
    assert first == {COPY: {"calls": 2, "bytes": 110}, DIRECT: {"calls": 1, "bytes": 50}}
    assert ways.summary() == {}  # since the last summary
    assert ways.totals[COPY][0] == 2  # the profile's: the session's life
    assert merged([first, None, {ZERO_COPY: {"calls": 1, "bytes": 1}}]) == {
        DIRECT: {"calls": 1, "bytes": 50},
        COPY: {"calls": 2, "bytes": 110},
        ZERO_COPY: {"calls": 1, "bytes": 1},
    }
