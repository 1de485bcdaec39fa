"""The one progress line of every verb: when it shows (``progress_wanted``) and how (in place
on a terminal, whole lines elsewhere, closing lines, notes, about how long is left)."""

from __future__ import annotations

import io
import re
import time

import pytest

from h5subfile import progress as progress_module
from h5subfile.progress import PROGRESS_VARIABLE, Progress, counted, percent, progress_wanted


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [False, True])
def test_who_shows_progress(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    monkeypatch.setattr(progress_module, "on_terminal", lambda: terminal)
    monkeypatch.delenv(PROGRESS_VARIABLE, raising=False)
    assert progress_wanted(0) is terminal  # by default: when the user sees a terminal
    assert progress_wanted(0, asked=True)  # --progress
    assert not progress_wanted(1, asked=True)  # rank 0 only
    assert not progress_wanted(0, quiet=True, asked=True)  # --quiet wins
    monkeypatch.setenv(PROGRESS_VARIABLE, "1")
    assert progress_wanted(0) and not progress_wanted(0, quiet=True) and not progress_wanted(2)
    monkeypatch.setenv(PROGRESS_VARIABLE, "0")
    assert not progress_wanted(0) and progress_wanted(0, asked=True)


def test_descriptions() -> None:
    assert percent(3, 8) == "37%" and percent(0, 0) == "100%"
    assert counted(3, 8) == "37% (3/8)"


def test_lines_elsewhere_show_closing_lines_and_notes() -> None:
    pipe = io.StringIO()
    line = Progress(True, pipe, interval=3600)
    line.phase("repack:", 0)
    line.step(10, 100, note="1/4 datasets")  # within the interval: not shown
    line.step(100, 100, last=True, note="4/4 datasets")  # the phase's closing line
    line.finish("summary")
    line.close()  # nothing to end: whole lines
    assert pipe.getvalue().splitlines() == ["repack: 100% (100/100), 4/4 datasets, 0 s", "summary"]


def test_a_terminal_line_is_rewritten_in_place() -> None:
    tty = _Terminal()
    with Progress(True, tty) as line:
        line.phase("verify:", 4)
        time.sleep(0.3)
        line.step(1)  # the interval on a terminal is short: shown, with how long is left
        line.finish("ok")
    text = tty.getvalue()
    assert text.startswith("\rverify:\rverify: 25% (1/4), ")  # the phase, then its units
    assert re.search(r"\rverify: 25% \(1/4\), \d+ s, about \d+ s left", text), text
    assert text.endswith("\rok" + " " * (len(text.split("\r")[-2]) - 2) + "\n")  # old text wiped


def test_a_stream_gone_ends_the_progress_not_the_run() -> None:
    gone = io.StringIO()
    gone.close()  # as stderr whose reader went away
    line = Progress(True, gone)
    line.phase("repack:", 2)
    line.step(2, last=True)
    line.finish("done")
    assert not line.enabled
