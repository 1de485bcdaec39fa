"""Commits per step and live readers: File.commit, commit_every_step, h5subfile.follow, and
readers that never make a writer fail (issue: overlap I/O with compute, read steps while the
job still writes them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5subfile as hs
from conftest import MPIEXEC, SCRIPTS, finish_job, run_cli, run_python
from h5subfile.layout.catalog import Catalog, NodeInfo
from h5subfile.layout.record import FileRecord, Session

JOB_TIMEOUT = 120


def _job(
    ranks: int, script: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``tests/mpi/<script>`` on ``ranks`` ranks in its own session (killable as one)."""
    command = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py"]
    return subprocess.Popen(
        [*command, str(SCRIPTS / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **(env or {})),
        start_new_session=True,
    )


def _lines(process: subprocess.Popen[str], what: str) -> list[str]:
    out, err = finish_job(process, JOB_TIMEOUT, what)
    assert process.returncode == 0, f"{what} failed ({process.returncode}):\n{out}\n{err[-3000:]}"
    return out.split("\n")


def _committed_steps(path: Path) -> list[str]:
    """The steps the file holds, as a separate reader sees them."""
    code = (
        "import sys, json, h5subfile as hs\n"
        "with hs.File(sys.argv[1], 'r') as f:\n"
        "    print(json.dumps(f._session.catalog.steps()))\n"
    )
    result = run_python(code, str(path))
    assert result.returncode == 0, result.stderr
    return [p.lstrip("/") for p in json.loads(result.stdout)]


@pytest.mark.parametrize(
    ("how", "plan", "copy_limit"),
    [
        ("every", "subfiles=1", ""),
        ("explicit", "subfiles=rank", ""),
        ("explicit", "subfiles=1", "0"),  # the master holds the data and is changed in place
        (
            "every",
            "subfiles=rank async_writes=1 async_always=1 async_buffer_size=4k",
            "",
        ),  # write-behind
    ],
)
def test_a_follower_sees_every_step_once_in_order(
    tmp_path: Path, how: str, plan: str, copy_limit: str
) -> None:
    path = tmp_path / "live.h5"
    follower = _job(2, "steps_follower.py", str(path), "60")
    time.sleep(0.5)  # the follower waits for a file that does not exist yet
    env = {"H5SUBFILE_MASTER_COPY_LIMIT": copy_limit} if copy_limit else None
    writer = _job(2, "steps_writer.py", str(path), "4", how, "0.3", *plan.split(), env=env)
    wrote = [line for line in _lines(writer, "writer") if line]
    seen = [line for line in _lines(follower, "follower") if line]
    assert wrote == [f"wrote {s}" for s in range(4)]
    assert seen == [f"step /Timestep_{s}" for s in range(4)] + ["end"]
    check = run_python(
        "import sys, h5py; f = h5py.File(sys.argv[1], 'r'); print(sorted(f))", str(path)
    )
    assert check.stdout.strip() == str([f"Timestep_{s}" for s in range(4)])


def test_a_killed_writer_leaves_every_committed_step_to_the_follower(tmp_path: Path) -> None:
    path = tmp_path / "killed.h5"
    follower = _job(1, "steps_follower.py", str(path), "60")
    writer = _job(2, "steps_writer.py", str(path), "50", "explicit", "0.2", "subfiles=2")
    assert writer.stdout is not None
    for line in writer.stdout:
        if line.startswith("wrote 2"):
            break
    os.killpg(writer.pid, signal.SIGKILL)
    writer.communicate()
    seen = [line for line in _lines(follower, "follower") if line]
    committed = _committed_steps(path)
    assert len(committed) >= 3
    assert seen[:-1] == [f"step /{s}" for s in committed]
    assert seen[-1].startswith("error WriterStoppedError: the writer of")
    assert "every step it committed was read" in seen[-1]


@pytest.mark.parametrize("commit", ["replace", "in-place"])
def test_readers_never_make_a_writer_fail(tmp_path: Path, commit: str) -> None:
    """A plain h5py reader (HDF5's file lock on) and an h5subfile reader hold the master open
    while a job appends steps to it, committed atomically or (a large master) in place."""
    path = tmp_path / "held.h5"
    with hs.File(path, "w") as f:
        f.create_group("Timestep_0").write_dataset("x", np.zeros(100))
    holders = [
        "import sys, time, h5py; f = h5py.File(sys.argv[1], 'r'); print('held', flush=True); "
        "time.sleep(30)",
        "import sys, time, h5subfile as hs; f = hs.File(sys.argv[1], 'r'); f['Timestep_0/x'][:]; "
        "print('held', flush=True); time.sleep(30)",
    ]
    readers = []
    for code in holders:
        reader = subprocess.Popen(
            [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert reader.stdout is not None and reader.stdout.readline().strip() == "held"
        readers.append(reader)
    env = {"H5SUBFILE_MASTER_COPY_LIMIT": "0" if commit == "in-place" else str(2**30)}
    try:
        code = (
            "import sys, numpy as np, h5subfile as hs\n"
            "with hs.File(sys.argv[1], 'a') as f:\n"
            "    for s in (1, 2):\n"
            "        f.create_group(f'Timestep_{s}').write_dataset('x', np.full(10, s))\n"
            "        f.commit()\n"
            "    print(f.sessions[-1]['commit'])\n"
        )
        appended = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT,
            env=dict(os.environ, **env),
        )
        assert appended.returncode == 0, appended.stderr
        assert appended.stdout.strip() == commit
    finally:
        for reader in readers:
            reader.kill()
            reader.communicate()
    assert _committed_steps(path) == ["Timestep_0", "Timestep_1", "Timestep_2"]


def test_follow_a_closed_file_and_time_out_on_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "done.h5"
    with hs.File(path, "w") as f:
        for step in (0, 1, 2):
            f.create_group(f"Timestep_{step}").write_dataset("x", np.full(4, step))
            if step == 1:
                f.commit()
    names = [(g.name, g["x"][:].tolist()) for g in hs.follow(path, timeout=5)]
    assert names == [(f"/Timestep_{s}", [s] * 4) for s in (0, 1, 2)]
    started = time.monotonic()
    with pytest.raises(hs.FollowTimeoutError, match="no new step of .* in 0.3 s"):
        list(hs.follow(tmp_path / "never.h5", timeout=0.3))
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("timeout", [-5, -0.1, float("nan"), "soon"])
def test_follow_refuses_a_timeout_that_is_not_seconds(tmp_path: Path, timeout: object) -> None:
    path = tmp_path / "done.h5"
    with hs.File(path, "w") as f:
        f.create_group("Timestep_0").write_dataset("x", np.arange(4))
    with pytest.raises(hs.PlanError, match=rf"^timeout={timeout!r}: .*\(None: wait for ever\)"):
        hs.follow(path, timeout=timeout)  # refused at the call, before any iteration
    with pytest.raises(ValueError, match=r"^poll_interval=-1: expected a non-negative"):
        hs.follow(path, poll_interval=-1)
    for endless in (None, float("inf")):  # no limit: a closed file's steps, then the end
        assert [g.name for g in hs.follow(path, timeout=endless)] == ["/Timestep_0"]
    assert [g.name for g in hs.follow(path, timeout=0)] == ["/Timestep_0"]


def test_commit_every_step_commits_when_the_next_step_starts(tmp_path: Path) -> None:
    path = tmp_path / "every.h5"
    code = "import sys, h5py; print(sorted(h5py.File(sys.argv[1], 'r')))"
    with hs.File(path, "w", commit_every_step=True) as f:
        f.create_group("Timestep_0").write_dataset("x", np.arange(3))
        f["Timestep_0"].write_dataset("y", np.arange(3))  # the same step: no commit
        assert not path.exists()
        f.create_group("Timestep_1")
        assert run_python(code, str(path)).stdout.strip() == "['Timestep_0']"
        f["Timestep_1"].write_dataset("x", np.arange(3))
        f.write_dataset("/Timestep_2/x", np.arange(3))  # a new step, its group made implicitly
        assert run_python(code, str(path)).stdout.strip() == "['Timestep_0', 'Timestep_1']"
        assert f.plan is not None and f.plan.commit_every_step
    assert _committed_steps(path) == ["Timestep_0", "Timestep_1", "Timestep_2"]


def test_commit_errors(tmp_path: Path) -> None:
    path = tmp_path / "errors.h5"
    with hs.File(path, "w") as f:
        written = f.create_group("A").write_dataset("x", np.arange(5.0))
        f.commit()
        with pytest.raises(hs.FileModeError, match="File.commit ends a session"):
            written[0:2] = np.zeros(2)
        assert written[:].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        declared = f.create_dataset("B", shape=(4,), dtype="f8", block=slice(0, 4))
        declared[0:2] = np.ones(2)
        with pytest.raises(hs.IncompleteFileError, match="never wrote"):
            f.commit()
        with pytest.raises(hs.FileModeError, match="closed"):
            f.create_group("C")
    with pytest.warns(RuntimeWarning, match="/B was not completely written"):
        f = hs.File(path, "r")
    with f:
        with pytest.raises(hs.FileModeError, match="read-only"):
            f.commit()
        assert f["A/x"][:].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(hs.PlanError, match="commit_every_step"):
        hs.File(path, "r", commit_every_step=True)


def test_steps_in_commit_order_or_natural_order() -> None:
    def catalog(paths: list[str], sessions: list[Session]) -> Catalog:
        nodes = {"/": NodeInfo("group")}
        for path in paths:
            nodes[path] = NodeInfo("dataset" if path.endswith("/x") else "group")
        return Catalog(nodes, FileRecord(sessions))

    plain = catalog(["/Timestep_10", "/Timestep_2", "/Timestep_2/x", "/Timestep_10/x"], [])
    assert plain.steps() == ["/Timestep_2", "/Timestep_10"]
    closed = Session(0, "w", 1, {}, "", [], "", "", closed="t", extra={"steps": ["/b", "/a"]})
    open_ = Session(1, "a", 1, {}, "", [], "", "")
    recorded = catalog(["/b", "/b/x", "/a", "/a/x", "/c", "/c/x", "/d"], [closed, open_])
    assert recorded.steps() == ["/b", "/a"]
    assert recorded.new_steps() == ["/c"]  # /d holds no dataset yet


def test_bdcats_follows_vpic(tmp_path: Path) -> None:
    path = tmp_path / "vpic.h5"
    reader = subprocess.Popen(
        [
            str(MPIEXEC),
            "-n",
            "3",
            sys.executable,
            "-m",
            "h5subfile",
            "bdcats",
            str(path),
            "--follow",
            "--verify",
            "--timeout",
            "60",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    written = run_cli(
        2,
        "vpic",
        str(path),
        "--particles",
        "4k",
        "--steps",
        "3",
        "--commit-every-step",
        "--subfiles",
        "rank",
    )
    assert written.returncode == 0, written.stderr
    out, err = finish_job(reader, JOB_TIMEOUT, "bdcats --follow")
    assert reader.returncode == 0, err
    metrics = json.loads(out)
    assert metrics["verified"] and metrics["follow"]
    assert metrics["total_bytes"] == 2 * 4000 * 32 * 3
    refused = run_cli(1, "bdcats", str(path), "--follow", "--profile", str(tmp_path / "p"))
    assert refused.returncode == 2 and "cannot be profiled" in refused.stderr
    with h5py.File(path, "r") as f:
        assert sorted(f) == ["Timestep_0", "Timestep_1", "Timestep_2"]


def test_a_file_rewritten_while_followed_is_refused_not_mixed(tmp_path: Path) -> None:
    path = tmp_path / "rerun.h5"

    def run(first: int, steps: int) -> None:
        with hs.File(path, "w") as f:
            for step in range(steps):
                f.create_group(f"T{step}").write_dataset("x", np.full(3, first + step))
                f.commit()

    run(100, 2)
    followed = hs.follow(path, timeout=5)
    seen = [next(followed)["x"][:].tolist(), next(followed)["x"][:].tolist()]
    run(200, 4)  # a new run of the same steps, past those already yielded
    with pytest.raises(hs.H5SubfileError, match="was replaced while followed"):
        next(followed)
    assert seen == [[100] * 3, [101] * 3]


def test_steps_leave_out_unfinished_groups_and_order_old_ones_naturally(tmp_path: Path) -> None:
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:  # a file written without steps
        for step in (10, 2, 1):
            f.create_dataset(f"Timestep_{step}/x", data=np.arange(3))
    with hs.File(path, "a") as f:
        f.create_group("Timestep_11").write_dataset("x", np.arange(3))
        declared = f.create_group("Timestep_12").create_dataset("x", (4,), "f8", block=slice(0, 4))
        declared[0:2] = np.ones(2)
        with pytest.raises(hs.IncompleteFileError, match="never wrote"):
            f.commit()
    with pytest.warns(RuntimeWarning, match="not completely written"):
        f = hs.File(path, "r")
    with f:
        assert f.sessions[0]["extra"]["steps"] == [
            "/Timestep_1",
            "/Timestep_2",
            "/Timestep_10",
            "/Timestep_11",
        ]
