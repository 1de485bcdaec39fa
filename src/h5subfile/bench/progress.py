"""Progress of long benchmark runs: one line on rank 0's stderr.

On a terminal the line is rewritten in place (``\\r``), at most a few times a second, and shows
how far rank 0 is inside the current phase; elsewhere (a pipe, a log file, and under most
``mpiexec`` launchers) nothing is printed unless asked (``--progress``), and then one line per
finished phase plus, inside long phases, a line at most every ``PIPE_INTERVAL`` seconds. Other
ranks never print: their :class:`Progress` is disabled.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

TTY_INTERVAL = 0.25
PIPE_INTERVAL = 10.0


def wanted(mode: str, stream: TextIO | None = None) -> bool:
    """Whether to show progress: ``mode`` is ``"on"``, ``"off"`` or ``"auto"`` (a terminal)."""
    if mode == "auto":
        stream = sys.stderr if stream is None else stream
        isatty = getattr(stream, "isatty", None)
        return bool(isatty and isatty())
    return mode == "on"


class Progress:
    """A progress line: ``phase`` starts a phase, ``step`` reports units done in it, ``done``
    closes it with a summary. Disabled, every call is a no-op (other ranks, ``--quiet``)."""

    def __init__(self, enabled: bool, stream: TextIO | None = None, tty: bool | None = None):
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        self.tty = wanted("auto", self.stream) if tty is None else tty
        self.label = ""
        self.total = 0
        self.last = 0.0
        self.width = 0

    def phase(self, label: str, total: int) -> None:
        """Start a phase of ``total`` units (transfers on rank 0)."""
        if not self.enabled:
            return
        self.label, self.total = label, max(total, 1)
        self.last = time.monotonic()
        self._show(f"{label} 0%", line=False)

    def step(self, done: int) -> None:
        """``done`` units of the phase are finished (cheap when nothing is printed)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < (TTY_INTERVAL if self.tty else PIPE_INTERVAL):
            return
        self.last = now
        self._show(
            f"{self.label} {100 * done // self.total}% ({done}/{self.total} on rank 0)", line=True
        )

    def done(self, text: str) -> None:
        """The phase is over: ``text`` replaces the line (or is printed on its own line)."""
        if self.enabled:
            self._show(text, line=True)

    def close(self) -> None:
        """End the line in place on a terminal, so that what follows starts on a new line."""
        if self.enabled and self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0

    def _show(self, text: str, line: bool) -> None:
        """On a terminal, rewrite the line; elsewhere print ``text`` on its own line if ``line``."""
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        elif line:
            self.stream.write(text + "\n")
        self.stream.flush()
