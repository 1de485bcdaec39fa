"""Progress lines on rank 0's stderr, for every command that runs long (``bench``, ``vpic``,
``bdcats``, ``verify``, ``repack``) and for benchmark sweeps.

*Whether* progress is shown is decided in one place, :func:`progress_wanted`: on rank 0 only,
never with ``--quiet``, always with ``--progress`` (or ``H5SUBFILE_PROGRESS=1``), otherwise when
the user reads the output on a terminal (:func:`on_terminal`: this process's stderr, or under
an MPI launcher, which passes the ranks' output through pipes, the launcher's).

*How* is :class:`Progress`: a run is a sequence of phases, each of some units (transfers,
steps, datasets, bytes). On a terminal one line is rewritten in place (``\\r``), at most every
``TTY_INTERVAL`` seconds; elsewhere (a pipe, a log file, the ranks' pipes under ``mpiexec``)
whole lines are printed, at most one every ``interval`` seconds, plus each phase's closing
line. A line says where the phase is, the seconds since it started and, once a unit is done,
about how long is left; while one unit takes long, a ticking thread says which unit the run is
at (``vpic: at step 3/10, 41 s, about 95 s left``). Disabled (other ranks, ``--quiet``), every
call is a no-op.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

#: Set to 1 to show progress lines without a terminal (``--progress``), 0 to hide them.
PROGRESS_VARIABLE = "H5SUBFILE_PROGRESS"
#: Seconds between two rewrites of the line on a terminal.
TTY_INTERVAL = 0.25
#: Seconds between two whole lines elsewhere (by default; a phase's closing line always shows).
LINE_INTERVAL = 2.0

#: Names of the processes that launch MPI jobs (``/proc/PID/comm``), whose stderr is where the
#: ranks' output ends up.
LAUNCHERS = ("mpiexec", "mpirun", "mpiexec.hydra", "mpiexec.mpich", "orterun", "prterun", "srun")

_ON = ("1", "yes", "true", "on")
_OFF = ("0", "no", "false", "off")

#: ``describe(done, total)``: where a phase is, in words (``step 3/10 written``).
Describe = Callable[[int, int], str]


def progress_wanted(rank: int, quiet: bool = False, asked: bool = False) -> bool:
    """Whether this process shows progress: rank 0 only; never when ``quiet`` (``--quiet``);
    always when ``asked`` (``--progress``) or ``H5SUBFILE_PROGRESS=1``; never with
    ``H5SUBFILE_PROGRESS=0``; otherwise when the user's stderr is a terminal."""
    if rank != 0 or quiet:
        return False
    forced = os.environ.get(PROGRESS_VARIABLE, "").strip().lower()
    if asked or forced in _ON:
        return True
    if forced in _OFF:
        return False
    return on_terminal()


def on_terminal() -> bool:
    """Whether stderr is a terminal: this process's, or under an MPI launcher (which passes the
    ranks' output through pipes) the launcher's, found by walking up the process tree."""
    if sys.stderr.isatty():
        return True
    pid = os.getppid()
    for _ in range(4):  # mpiexec -> proxy -> this process, or srun -> step daemon -> this
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/comm") as comm:
                name = comm.read().strip()
            if name in LAUNCHERS:
                return os.readlink(f"/proc/{pid}/fd/2").startswith(("/dev/pts/", "/dev/tty"))
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def percent(done: int, total: int) -> str:
    """``done`` of ``total`` as a whole percentage, rounded down (``37%``; 100% of nothing)."""
    return f"{100 * done // total if total > 0 else 100}%"


def counted(done: int, total: int) -> str:
    """The default description of where a phase is: ``37% (3/8)``."""
    return f"{percent(done, total)} ({done}/{total})"


class Progress:
    """The progress line of one process (see the module's docstring).

    ``phase`` starts a phase, ``step`` reports units done in it (also as ``progress(done,
    total)``, the callback the kernels and ``File.verify`` take), ``finish`` closes it with a
    summary, ``close`` ends the line on a terminal. As a context manager it closes the line at
    the end and, once a phase with a ``unit`` starts, runs the ticking thread. ``stream``
    defaults to stderr, ``tty`` to whether ``stream`` is a terminal (then the line is rewritten
    in place), ``interval`` is the seconds between whole lines elsewhere.
    """

    def __init__(
        self,
        enabled: bool,
        stream: TextIO | None = None,
        tty: bool | None = None,
        interval: float = LINE_INTERVAL,
    ) -> None:
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        if tty is None:
            try:
                tty = bool(self.stream.isatty())
            except (AttributeError, OSError, ValueError):  # no such method, or closed
                tty = False
        self.tty = tty
        self.interval = TTY_INTERVAL if tty else interval
        self.label, self.unit = "", ""
        self.describe: Describe = counted
        self.count = self.total = 0
        self.started = self.shown = time.monotonic()
        self.width = 0  # of the line shown in place on a terminal
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inside = False  # in a ``with`` block: phases with a unit may tick

    def __enter__(self) -> Progress:
        self._inside = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._inside = False
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.close()

    def phase(
        self, label: str, total: int = 0, describe: Describe | None = None, unit: str = ""
    ) -> None:
        """Start a phase of ``total`` units (0: the first ``step`` gives it). Its lines read
        ``LABEL DESCRIPTION, T s[, about N s left]``, the description from ``describe(done,
        total)`` (default :func:`counted`); with ``unit`` (a noun: ``step``), while one unit
        takes longer than the interval the ticking thread says ``LABEL at UNIT i/n, ...``."""
        if not self.enabled:
            return
        with self._lock:
            self.label, self.total, self.unit = label, total, unit
            self.describe = describe or counted
            self.count = 0
            self.started = self.shown = time.monotonic()
            if self.tty:  # which phase runs; its units follow (elsewhere its lines say it)
                self._show(label)
        if unit and self._inside and self._thread is None:  # a thread only where it can speak
            self._stop.clear()
            self._thread = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._thread.start()

    def step(self, done: int, total: int | None = None, last: bool = False, note: str = "") -> None:
        """``done`` units of the phase are finished (of ``total``, when given). A line shows if
        a unit is done and the interval has passed since the last line, or if ``last`` (the
        phase's closing line); ``note`` is added to it (``3/16 datasets``). Cheap when nothing
        is shown."""
        if not self.enabled:
            return
        self.count = done
        if total is not None:
            self.total = total
        now = time.monotonic()
        if not last and (done <= 0 or now - self.shown < self.interval):
            return  # nothing done yet (the phase's start says it), or too soon
        with self._lock:
            what = self.describe(done, self.total) + (f", {note}" if note else "")
            self._show(self._line(what, now, done))

    def __call__(self, done: int, total: int) -> None:
        """``progress(done, total)``: a step, the phase's last once ``done`` reaches ``total``."""
        self.step(done, total, last=done >= total)

    def finish(self, text: str) -> None:
        """Close the phase with ``text`` (its summary): on a terminal it replaces the line,
        elsewhere it is printed on a line of its own."""
        if not self.enabled:
            return
        with self._lock:
            self.unit = ""  # nothing left to tick about
            self._show(text)

    def close(self) -> None:
        """End the line in place on a terminal, so that what follows starts on a new line."""
        if self.enabled and self.tty and self.width:
            with self._lock:
                self._write("\n")
                self.width = 0

    def _tick(self) -> None:
        """The ticking thread: while one unit takes long, say which unit the phase is at."""
        while not self._stop.wait(self.interval / 4):
            with self._lock:
                now = time.monotonic()
                if self.unit and self.count < self.total and now - self.shown >= self.interval:
                    at = f"at {self.unit} {self.count + 1}/{self.total}"
                    self._show(self._line(at, now, self.count))

    def _line(self, what: str, now: float, done: int) -> str:
        """``LABEL WHAT, T s`` and, once a unit is done, about how long is left."""
        elapsed = now - self.started
        text = f"{self.label} {what}, {elapsed:.0f} s"
        if 0 < done < self.total:
            text += f", about {elapsed * (self.total - done) / done:.0f} s left"
        return text

    def _show(self, text: str) -> None:
        """Rewrite the line on a terminal, or print ``text`` on a line of its own (lock held)."""
        if self.tty:
            self._write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self._write(text + "\n")
        self.shown = time.monotonic()

    def _write(self, text: str) -> None:
        """Write and flush; a stream that cannot be written (its reader went away, closed)
        ends the progress, not the run."""
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False
