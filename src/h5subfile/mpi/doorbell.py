"""A doorbell per process: what a rank waiting in a polled round sleeps on, and what the rank it
waits for rings once its message is sent (docs/DESIGN-NOTES.md, "Star rounds and doorbells").

The bell is a Unix datagram socket bound to a name in Linux's abstract namespace (no file to
clean up: the name goes with the process), so ringing it is one ``sendto`` of an empty
datagram, and waiting on it is a ``select`` with a timeout. A bell never decides anything: a
ring missed, late or spurious costs a wake-up or a pause, never an answer, since the waiting
rank still tests its request after every wake-up. Where abstract sockets do not exist (not
Linux) there is no bell, and ranks sleep between tests as before.

Each rank's :meth:`Doorbell.address` (host key, process id, token, flags) is exchanged once
per communicator, with its first round (:mod:`.rounds`); the flags say whether the rank's node
runs more ranks than cores, and star rounds need every rank to say so on one host.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import secrets
import select
import socket
import sys

import numpy as np

#: What each rank tells the others of its bell: a key of its host, its process id, the random
#: token of its bell's name, and its flags (:data:`OVERSUBSCRIBED`).
ADDRESS_FIELDS = 4
OVERSUBSCRIBED = 1
#: Linux queues 10 datagrams on a socket by default (``net.unix.max_dgram_qlen``): from this
#: many rings heard at once, more may have been sent.
MANY = 8


def host_key() -> int:
    """A 62-bit key of this host's name, the same in every process on it."""
    digest = hashlib.blake2b(socket.gethostname().encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


def _name(pid: int, token: int) -> bytes:
    return b"\0h5subfile-bell-%d-%x" % (pid, token)


class Doorbell:
    """This process's bell, and the addresses of the bells it rings."""

    def __init__(self) -> None:
        self.token, self.pid = secrets.randbits(62), os.getpid()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._socket.bind(_name(self.pid, self.token))
            self._socket.setblocking(False)
        except OSError:
            self._socket.close()
            raise

    def address(self, flags: int) -> np.ndarray:
        """This rank's part of the exchange of addresses (``ADDRESS_FIELDS`` uint64)."""
        return np.array([host_key(), self.pid, self.token, flags], dtype=np.uint64)

    def wait(self, seconds: float) -> int:
        """Sleep until the bell rings or ``seconds`` pass (at once when it rang meanwhile);
        the rings heard are cleared: how many (at most :data:`MANY`)."""
        with contextlib.suppress(InterruptedError):
            select.select([self._socket], [], [], seconds)
        return self.clear()

    def clear(self) -> int:
        """Forget the rings heard so far (a ring after this wakes the next :meth:`wait`): how
        many there were, at most :data:`MANY` (the kernel queues only a few datagrams, so more
        rings than that may have been refused)."""
        heard = 0
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while True:
                self._socket.recv(16)
                heard += 1
        return min(heard, MANY)

    def close(self) -> None:
        """Close this process's end of the bell (a forked child's copy of its parent's)."""
        self._socket.close()

    def ring(self, address: np.ndarray) -> None:
        """Ring the bell at ``address`` (a row of the exchange of addresses). A bell gone or
        full is not an error: its rank tests its request when its pause ends anyway."""
        with contextlib.suppress(OSError):
            self._socket.sendto(b"", _name(int(address[1]), int(address[2])))


_BELL: list[Doorbell | None] = []


def own_bell() -> Doorbell | None:
    """This process's bell, made on first use (again in a forked child, whose parent's bell
    it must not answer for); None where abstract sockets do not exist."""
    cached = _BELL[0] if _BELL else None
    if cached is not None and cached.pid != os.getpid():
        cached.close()
        _BELL.clear()
    if not _BELL:
        bell = None
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, ValueError):
                bell = Doorbell()
                atexit.register(bell.close)  # its name goes with it
        _BELL.append(bell)
    return _BELL[0]
