"""The doorbell of a process (mpi/doorbell.py): local, no MPI."""

from __future__ import annotations

import os
import time

import pytest

from h5subfile.mpi import doorbell


@pytest.fixture
def bell() -> doorbell.Doorbell:
    made = doorbell.own_bell()
    if made is None:
        pytest.skip("no abstract Unix sockets here")
    made.clear()
    return made


def test_a_doorbell_counts_its_rings_and_ignores_bells_that_are_gone(
    bell: doorbell.Doorbell,
) -> None:
    """A bell rung three times wakes at once and counts three; a wait with no ring sleeps its
    pause and counts none; ringing a bell whose process is gone is not an error."""
    mine = bell.address(doorbell.OVERSUBSCRIBED)
    assert mine.tolist()[1:] == [os.getpid(), bell.token, doorbell.OVERSUBSCRIBED]
    assert mine[0] == doorbell.host_key()
    for _ in range(3):
        bell.ring(mine)
    began = time.monotonic()
    assert bell.wait(5.0) == 3
    assert time.monotonic() - began < 1.0
    began = time.monotonic()
    assert bell.wait(0.02) == 0
    assert time.monotonic() - began >= 0.015
    for _ in range(3 * doorbell.MANY):
        bell.ring(mine)  # the kernel refuses some once its queue is full: not an error
    assert bell.wait(0.0) == doorbell.MANY
    gone = mine.copy()
    gone[1] = 2**22 + 12345  # no such process id on Linux (pid_max is at most 2**22)
    bell.ring(gone)
    assert bell.wait(0.0) == 0


def test_a_forked_process_gets_a_bell_of_its_own(
    bell: doorbell.Doorbell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bell is made again when the process id changed (a forked child must not answer
    for its parent's bell, nor give out the parent's address as its own)."""
    assert doorbell.own_bell() is bell
    monkeypatch.setattr(bell, "pid", bell.pid + 1)  # as a forked child sees the cached bell
    other = doorbell.own_bell()
    assert other is not None and other is not bell and other.pid == os.getpid()
    assert other.token != bell.token
