"""h5bench-style metrics (``vpic``, ``bdcats``): raw + metadata = observed, rates only where a
time was measured, the same definitions in text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from h5subfile.kernels.bdcats import Pattern, check_pattern, resolve_count, select
from h5subfile.kernels.metrics import Metrics, combine_metrics


def test_metrics_add_up() -> None:
    metrics = combine_metrics("write", 4, 3 * 2**20, raw_max=1.5, observed_max=2.0)
    assert (metrics.raw_seconds, metrics.metadata_seconds, metrics.observed_seconds) == (
        1.5,
        0.5,
        2.0,
    )
    assert metrics.raw_rate == pytest.approx(2.0) and metrics.observed_rate == pytest.approx(1.5)
    # the slowest rank's raw time never exceeds the job's observed time
    clamped = combine_metrics("read", 2, 0, raw_max=1.0, observed_max=0.5)
    assert clamped.observed_seconds == 1.0 and clamped.metadata_seconds == 0.0


def test_no_time_no_rate() -> None:
    metrics = combine_metrics("write", 2, 0, raw_max=0.0, observed_max=0.25)
    assert metrics.raw_rate is None and metrics.observed_rate == 0.0
    text = metrics.report()
    assert "inf" not in text and "Raw write rate: n/a (no time measured)" in text
    assert "Observed write rate: 0.000 MiB/s" in text
    data = metrics.as_dict()
    assert data["raw_rate_mib_s"] is None and json.loads(json.dumps(data)) == data
    assert Metrics("read", 1, 10, 0.0, 0.0, 0.0).observed_rate is None


def test_a_partial_read_counts_half_the_shortest_share_unless_given() -> None:
    partial = Pattern("partial")
    assert resolve_count(partial, [600, 600], 2).count == 150
    assert resolve_count(partial, [601, 40, 600], 3).count == 7  # share 13, rounded up
    assert resolve_count(partial, [1], 1).count == 1 and resolve_count(partial, [1], 2).count == 0
    assert resolve_count(Pattern("partial", 500), [600], 2).count == 500  # checked, not changed
    assert check_pattern(Pattern("partial", 301), "/x", 600, 2) is not None
    assert resolve_count(Pattern("full"), [600], 2) == Pattern("full")
    assert select(partial, 600, 2, 1) == slice(300, 450)  # a rank's share from the start
    metrics = Metrics("read", 2, 10, 0.0, 0.0, 0.0, count=150)
    assert "\nParticles read per rank per dataset (partial): 150\n" in metrics.report()
    assert metrics.as_dict()["count"] == 150
    assert "count" not in Metrics("read", 2, 10, 0.0, 0.0, 0.0).as_dict()
    assert "Particles read" not in Metrics("read", 2, 10, 0.0, 0.0, 0.0).report()


def _vpic(tmp_path: Path, particles: str, *flags: str) -> str:
    result = run_cli(
        2, "vpic", tmp_path / f"v{particles}.h5", "--particles", particles, "--steps", "2", *flags
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_vpic_metrics_from_the_command_line(tmp_path: Path) -> None:
    text = _vpic(tmp_path, "0", "--quiet")
    assert "inf" not in text and text.count("Raw write rate: n/a") == 1
    assert text.count("Total write size: 0 B") == 1
    data = json.loads(_vpic(tmp_path, "4Ki", "--json").strip().splitlines()[-1])
    assert data["total_bytes"] == 2 * 4096 * 32 * 2
    assert data["raw_seconds"] + data["metadata_seconds"] == pytest.approx(
        data["observed_seconds"], rel=1e-12
    )
    assert 0 < data["raw_seconds"] <= data["observed_seconds"]
    assert data["raw_rate_mib_s"] == pytest.approx(
        data["total_bytes"] / 2**20 / data["raw_seconds"]
    )
    assert data["observed_rate_mib_s"] == pytest.approx(
        data["total_bytes"] / 2**20 / data["observed_seconds"]
    )


def test_emulated_compute_is_left_out_of_the_observed_time_and_counted_per_step(
    tmp_path: Path,
) -> None:
    """``--compute-time``: a sleep after each step but the last (h5bench's placement); the
    observed time leaves it out, the observed time per step counts it; with --async-writes the
    background writes are reported apart and the raw time is the caller's share."""
    flags = ("--compute-time", "150ms", "--json", "--quiet")
    sync = json.loads(_vpic(tmp_path, "4Ki", *flags).strip().splitlines()[-1])
    behind = json.loads(
        _vpic(tmp_path, "8Ki", *flags, "--async-writes", "--async-buffer-size", "64k")
        .strip()
        .splitlines()[-1]
    )
    for data in (sync, behind):
        assert data["steps"] == 2 and data["compute_time"] == 0.15
        assert 0.15 <= data["compute_seconds"] < 1.0  # one sleep: none after the last step
        assert data["raw_seconds"] + data["metadata_seconds"] == pytest.approx(
            data["observed_seconds"], rel=1e-12
        )
        assert data["observed_with_compute_seconds"] >= data["observed_seconds"] + 0.15
        assert data["observed_step_seconds"] == pytest.approx(
            data["observed_with_compute_seconds"] / 2
        )
    assert sync["background_write_seconds"] is None and sync["plan"]["async_writes"] is None
    assert behind["background_write_seconds"] > 0 and behind["plan"]["async_writes"] is True
    text = _vpic(tmp_path, "4Ki", "--compute-time", "0.1", "--async-writes", "--quiet")
    assert "Total emulated compute time: 0.1" in text
    assert "Observed time per step (with compute): " in text
    assert "Background write time (async_writes): " in text
    bad = run_cli(1, "vpic", tmp_path / "bad.h5", "--compute-time", "soon")
    assert bad.returncode == 2 and "cannot read 'soon' as a duration" in bad.stderr
