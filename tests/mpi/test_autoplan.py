"""``File(..., plan="auto")`` under MPI: every rank gets the plan of the profile rank 0 found and
says where it came from; profiles that cannot be used (damaged, a FIFO) are skipped with one
warning per job; a rank asking for it alone makes every rank raise (2 ranks in the suite)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from ranks import on_root, raises_on_every_rank

import h5subfile as hs
from h5subfile.engine import autoplan
from h5subfile.io.filesystem import probe
from h5subfile.io.tuning_profiles import Profile, save_profile
from h5subfile.layout.grouping import NODE_RULE


def test_every_rank_writes_with_the_profiles_plan(
    comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(shared_tmp / "profiles"))
    fs = probe(shared_tmp)
    saved = on_root(
        comm,
        lambda: str(save_profile(Profile(fs.name, fs.mount, comm.size, 1, {"subfiles": "rank"}))),
    )
    path = shared_tmp / "auto.h5"
    with hs.File(path, "w", plan="auto", alignment=4096) as f:
        assert f.plan_source.startswith(f"tuning profile {saved}")
        assert f.grouping.ngroups == comm.size  # the profile's file per process
        f.write_dataset("x", np.full(10, comm.rank, dtype="i4"))
    with hs.File(path, "r") as f:
        (session,) = f.sessions
        assert session["plan"]["subfiles"] == "rank" and session["plan"]["alignment"] == 4096
        assert session["extra"]["plan_source"] == f"tuning profile {saved} for {fs.name} on " + (
            f"{fs.mount}, {comm.size} ranks"
        )
        assert np.array_equal(f["x"][...], np.repeat(np.arange(comm.size, dtype="i4"), 10))


def test_a_profile_for_more_ranks_that_does_not_fit_is_passed_over(
    comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nearest profiles were tuned for 64 ranks, with more subfiles than this job has
    ranks: the job writes with the next that fits, as it would without ``plan="auto"`` it
    writes, and the record names the profiles passed over and why."""
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(shared_tmp / "profiles"))
    fs = probe(shared_tmp)

    def make() -> list[str]:
        made = [
            Profile(fs.name, fs.mount, 64, 2, {"subfiles": 32}),
            Profile(fs.name, fs.mount, 65, 2, {"subfiles": 10**18}),
            Profile(fs.name, fs.mount, 128, 4, {"ranks_per_subfile": 1}),
        ]
        return [str(save_profile(p)) for p in made]

    wide, huge, fits = on_root(comm, make)
    path = shared_tmp / "fits.h5"
    with hs.File(path, "w", plan="auto") as f:
        assert f.grouping.ngroups == comm.size  # one rank per subfile: the third profile's
        f.write_dataset("x", np.full(10, comm.rank, dtype="i4"))
        source = f.plan_source
    assert source.startswith(f"tuning profile {fits} for {fs.name} on {fs.mount}, 128 ranks")
    assert f"not fitting this job: {wide} (subfiles=32 but the communicator has only " in source
    assert f"{huge} (subfiles={10**18} but the communicator has only {comm.size} rank" in source
    with hs.File(path, "r") as f:
        assert f.sessions[0]["extra"]["plan_source"] == source
        assert np.array_equal(f["x"][...], np.repeat(np.arange(comm.size, dtype="i4"), 10))


def test_damaged_and_fifo_profiles_are_skipped_with_one_warning_per_job(
    comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO named ``*.json`` would block the open for ever (the suite's test timeout ends
    the job); a damaged profile must not fail it. Both are named in a warning, on rank 0 (the
    one that reads the profiles), once for the two files opened."""
    folder = shared_tmp / "profiles"
    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(folder))
    fs = probe(shared_tmp)
    fifo, damaged = folder / "a-fifo.json", folder / "b-damaged.json"

    def make() -> str:
        saved = save_profile(Profile(fs.name, fs.mount, comm.size, 1, {"subfiles": "rank"}))
        os.mkfifo(fifo)
        damaged.write_text(f'{{"version": 1, "filesystem": "{fs.name}", "ranks": 1e999}}')
        return str(saved)

    saved = on_root(comm, make)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in ("one.h5", "two.h5"):
            with hs.File(shared_tmp / name, "w", plan="auto") as f:
                assert f.plan_source.startswith(f"tuning profile {saved}")
                assert f.grouping.ngroups == comm.size
    messages = sorted(str(w.message) for w in caught if w.category is RuntimeWarning)
    if comm.rank == 0:
        assert len(messages) == 2, messages
        assert f"tuning profile {fifo} is a FIFO (named pipe), not a regular file" in messages[0]
        assert messages[1].startswith(f"tuning profile {damaged} is damaged (")
        assert "ranks=inf: expected a positive integer" in messages[1]
    else:
        assert messages == []


def test_plan_auto_on_one_rank_only_is_refused_on_every_rank(comm, shared_tmp: Path) -> None:
    if comm.size < 2:
        pytest.skip("two ranks disagree")
    choice = autoplan.AUTO if comm.rank == 1 else None
    with raises_on_every_rank(comm, hs.CollectiveMismatchError, "File"):
        hs.File(shared_tmp / "x.h5", "w", plan=choice)


@pytest.mark.parametrize("aggregators", [None, 1])
def test_plan_auto_locates_the_nodes_once_unless_every_rank_needs_them(
    comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch, aggregators: int | None
) -> None:
    """By node (no profile: the default grouping), ``plan="auto"`` locates the ranks' nodes
    once, for the profile's choice and the grouping alike; with aggregators the grouping
    needs every rank's node on every rank, a second round. The file is right either way."""
    from h5subfile.engine import session as sessions
    from h5subfile.mpi import nodes

    monkeypatch.setenv("H5SUBFILE_TUNING_DIR", str(shared_tmp / "no-profiles"))
    rounds: list[bool] = []

    def locate(comm_, every_rank=False):  # type: ignore[no-untyped-def]
        rounds.append(every_rank)
        return nodes.locate_nodes(comm_, every_rank=every_rank)

    monkeypatch.setattr(sessions, "locate_nodes", locate)
    monkeypatch.setattr(autoplan, "locate_nodes", locate)
    path = shared_tmp / f"auto-nodes-{aggregators}.h5"
    with hs.File(path, "w", plan="auto", aggregators=aggregators) as f:
        assert f.grouping.rule == NODE_RULE
        f.write_dataset("x", np.full(10, comm.rank, dtype="i4"))
    assert rounds == ([False] if aggregators is None else [False, True])
    with hs.File(path, "r") as f:
        assert np.array_equal(f["x"][...], np.repeat(np.arange(comm.size, dtype="i4"), 10))
