"""The command line's words, checked in this process (no MPI): help texts, values checked when
the command line is parsed, and error messages in the user's terms."""

from __future__ import annotations

import argparse
import re

import pytest

from h5subfile.cli import build_parser
from h5subfile.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_USAGE,
    UsageError,
    exit_status,
    plan_arguments,
    user_message,
)
from h5subfile.errors import RankIOError


def verb_help(verb: str) -> str:
    parser = build_parser()
    return parser.get_default("verb_parsers")[verb].format_help()


def test_the_top_level_help_says_what_the_tool_is_and_its_exit_statuses() -> None:
    text = build_parser().format_help()
    assert "one module per verb" not in text
    assert "Parallel HDF5 output and input for MPI applications" in text
    for status in ("0 success", "1 the command failed", "2 the command line is wrong"):
        assert status in " ".join(text.split()), text


def test_help_shows_defaults_and_describes_reading() -> None:
    bench = " ".join(verb_help("bench").split())
    assert re.search(r"-a API [^-]*default:? posix\)", bench), bench
    assert re.search(r"-i ITERATIONS [^-]*default:? 1\)", bench), bench
    bdcats = " ".join(verb_help("bdcats").split())
    for option in ("--start", "--stride", "--block"):
        assert option in bdcats
    assert "first offset in the share (default: 0)" in bdcats
    assert "particles between blocks (default: 16)" in bdcats
    assert "particles per block (default: 4)" in bdcats
    aggregators = bdcats.split("--aggregators AGGREGATORS", 2)[2].split("--buffer-size")[0]
    assert "read" in aggregators and "write" not in aggregators, aggregators
    demo = " ".join(verb_help("demo").split())
    assert "ranks writing with VPIC-IO" in demo and "ranks reading back" in demo
    assert "--keep DIR" in demo
    info = " ".join(verb_help("info").split())
    assert "the file to describe" in info


def test_plan_flags_keep_their_parsed_values() -> None:
    parse = build_parser().parse_args
    assert plan_arguments(parse(["vpic", "f.h5", "--subfiles", "2"]))["subfiles"] == 2
    assert plan_arguments(parse(["vpic", "f.h5", "--subfiles", "node"]))["subfiles"] == "node"
    assert plan_arguments(parse(["vpic", "f.h5", "--subfiles", "rank"]))["subfiles"] == "rank"
    # "direct" stays a word: given explicitly, it overrides H5SUBFILE_AGGREGATORS
    assert plan_arguments(parse(["bdcats", "f.h5", "--aggregators", "direct"]))["aggregators"] == (
        "direct"
    )


@pytest.mark.parametrize(
    "argv, said",
    [
        (["bdcats", "f.h5", "--fraction", "2"], "argument --fraction: must be in (0, 1]"),
        (["bdcats", "f.h5", "--stride", "0"], "argument --stride: must be at least 1"),
        (["bdcats", "f.h5", "--block", "0"], "argument --block: must be at least 1"),
        (["vpic", "f.h5", "--particles", "abc"], "argument --particles: cannot read 'abc'"),
        (["vpic", "f.h5", "--steps", "x"], "argument --steps: expected a whole number"),
        (["vpic", "f.h5", "--subfiles", "abc"], "argument --subfiles: subfiles='abc'"),
        (["demo", "--writers", "1"], "argument --writers: must be at least 2"),
        (["bench", "-b", "x"], "argument -b: cannot read 'x'"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err, err
    assert "invalid" not in err and "parse_count" not in err and "parse_size" not in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "raw, shown",
    [
        (
            "RankIOError: FileNotFoundError: [Errno 2] No such file or directory: 'out.json'",
            "No such file or directory: 'out.json'",
        ),
        (
            "BenchOptionError: -b, -t, -s and -i must be positive",
            "-b, -t, -s and -i must be positive",
        ),
        (
            "/d/run.h5 was never completed: its writer did not close it (/d/run.h5.partial is "
            "the unfinished master); rerun the writer",
            "/d/run.h5 was never completed: its writer did not close it; rerun the writer",
        ),
        (
            "cannot write /d/out.h5.repack-1a2b3c4d.partial/out.h5: disk full",
            "cannot write /d/out.h5: disk full",
        ),
        (
            "/tmp cannot be opened as HDF5: [Errno 21] Unable to synchronously open file (file "
            "read failed: time = Mon Nov 23\n, filename = '/tmp', errno = 21)",
            "/tmp cannot be opened as HDF5: Unable to synchronously open file",
        ),
    ],
)
def test_messages_leave_out_internal_names(raw: str, shown: str) -> None:
    assert user_message(RankIOError(raw)) == shown


def test_exit_statuses() -> None:
    assert exit_status(UsageError("x")) == EXIT_USAGE
    assert exit_status(RankIOError("x")) == EXIT_FAILED
    assert exit_status(BrokenPipeError(32, "Broken pipe")) == EXIT_BROKEN_PIPE
    assert exit_status(RankIOError("BrokenPipeError: [Errno 32] Broken pipe")) == EXIT_BROKEN_PIPE
    assert exit_status(ValueError("x")) == EXIT_FAILED
    assert isinstance(UsageError("x"), argparse.ArgumentError.__mro__[-2])  # an Exception


def test_progress_says_where_a_long_step_is(capsys: pytest.CaptureFixture[str]) -> None:
    import time

    from h5subfile.progress import Progress

    def written(done: int, total: int) -> str:
        return f"step {done}/{total} written"

    with Progress(True, interval=0.05) as progress:  # stderr is captured: not a terminal
        progress.phase("vpic:", 2, written, unit="step")
        progress(0, 2)
        time.sleep(0.3)  # a long first step: the ticking thread speaks
        progress(1, 2)
        time.sleep(0.3)
        progress(2, 2)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("vpic: at step 1/2, "), lines
    assert any(line.startswith("vpic: at step 2/2, ") and "s left" in line for line in lines)
    assert lines[-1].startswith("vpic: step 2/2 written, "), lines
    with Progress(False, interval=0.05) as progress:
        progress.phase("vpic:", 1, written, unit="step")
        progress(0, 1)
        time.sleep(0.1)
        progress(1, 1)
    assert not capsys.readouterr().err
