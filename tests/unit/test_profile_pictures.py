"""The report's pictures and page on crafted profiles (docs/PROFILING.md, *Report*): every
picture the profile allows is a real PNG with something drawn on it, the page shows each one
and lists the findings, and what needs a trace says so when there is none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from h5subfile.profiler.counters import PosixRecord, Trace
from h5subfile.profiler.findings import findings
from h5subfile.profiler.pictures import PAGE, PICTURES, format_page, write_report
from h5subfile.profiler.reduction import reduce_profiles

KiB, MiB = 1 << 10, 1 << 20
PNG = b"\x89PNG\r\n\x1a\n"


def profile(traced: bool) -> dict[str, Any]:
    """Two ranks in two subfiles, rank 0 also writing a master in small unaligned pieces and
    reading back, with phases; traced or not."""
    ranks = []
    for r in range(2):
        trace = Trace(10_000) if traced else None
        data = PosixRecord(f"/job/run.subfiles/s0-0000-{r:05d}.h5", trace=trace)
        data.record_open(0.01, 0.02, 4096)
        for i in range(200):
            data.record_write(i * 64 * KiB + r, 64 * KiB, 0.1 + i * 0.002, 0.101 + i * 0.002)
        data.record_read(0, MiB, 0.6, 0.65)
        data.record_close(0.7, 0.71)
        records = [{"path": data.path, **data.as_dict()}]
        if r == 0:
            master = PosixRecord("/job/run.h5", trace=trace)
            master.record_open(0.0, 0.001, 4096)
            for i in range(60):
                master.record_write(1 + 96 * i, 96, 0.05 + i * 1e-4, 0.05 + (i + 1) * 1e-4)
            records.append({"path": master.path, **master.as_dict()})
        phases = {"transfer": {"seconds": 0.4 + r / 10, "count": 2}, "commit": {"seconds": 0.1}}
        phases["commit"]["count"] = 1
        ranks.append(
            {
                "rank": r,
                "records": records,
                "phases": phases,
                "trace": trace.as_dict() if trace is not None else None,
                "unparsed": 0,
            }
        )
    return reduce_profiles(ranks, run_time=0.75)


def assert_a_real_picture(path: Path) -> None:
    """A PNG of some size, with more than a handful of colours drawn on it."""
    import matplotlib.image

    data = path.read_bytes()
    assert data[:8] == PNG, path
    assert len(data) > 5000, (path, len(data))
    pixels = matplotlib.image.imread(str(path))
    assert pixels.shape[0] > 200 and pixels.shape[1] > 500, (path, pixels.shape)
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert len(colours) > 20, (path, len(colours))


def test_a_traced_profile_gets_every_picture(tmp_path: Path) -> None:
    doc = profile(traced=True)
    written = write_report(doc, str(tmp_path / "out"), "run.h5.write.json")
    assert written == [*PICTURES, PAGE]
    for name in PICTURES:
        assert_a_real_picture(tmp_path / "out" / name)
    page = (tmp_path / "out" / PAGE).read_text()
    for name, caption in PICTURES.items():
        assert f"![{caption}]({name})" in page
    found = findings(doc)
    assert {f.key for f in found} >= {"unaligned", "metadata_rank"}
    for i, item in enumerate(found, 1):
        assert f"{i}. **{item.title}** (`{item.key}`)" in page
        assert item.evidence in page and item.advice in page
    assert "`alignment` (`--alignment`, `H5SUBFILE_ALIGNMENT`)" in page
    assert "No trace was kept" not in page
    assert "| 0 | 12.51 | 1.00 | 260 | 1 |" in page  # rank 0's row: 200 x 64 KiB + 60 x 96 B


def test_without_a_trace_the_page_says_what_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_report(profile(traced=True), str(out))
    written = write_report(profile(traced=False), str(out))
    assert "rate.png" not in written and not (out / "rate.png").exists()  # the old one removed
    for name in written[:-1]:
        assert_a_real_picture(out / name)
    page = (out / PAGE).read_text()
    assert "No trace was kept (`H5SUBFILE_PROFILE_TRACE=N` keeps one)" in page
    assert (
        "rate.png" not in page and "![Per-rank timeline of reads and writes](timeline.png)" in page
    )


def test_a_page_without_findings_or_phases_says_so() -> None:
    doc = profile(traced=False)
    for row in doc["ranks"]:
        row["phases"] = {}
    page = format_page(doc, [], ["timeline.png"])
    assert "None: no check's threshold was reached" in page
    assert "No phase was timed on any rank" in page


def test_dropped_trace_records_are_reported() -> None:
    doc = profile(traced=True)
    doc["ranks"][1]["trace"]["dropped"] = 7
    assert "The ranks' traces dropped 7 operations" in format_page(doc, [], [])


def test_missing_matplotlib_is_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h5subfile.cli.report import write_page
    from h5subfile.errors import H5SubfileError

    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    with pytest.raises(
        H5SubfileError, match=r"'plots' extra installs: pip install 'h5subfile\[plots\]'"
    ):
        write_page(str(tmp_path / "p.json"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_many_ranks_keep_the_pictures_bounded(tmp_path: Path) -> None:
    """200 ranks, file per process: no picture grows past MAX_INCHES."""
    from h5subfile.profiler.pictures import MAX_INCHES

    ranks = []
    for r in range(200):
        rec = PosixRecord(f"/job/run.subfiles/s0-0000-{r:05d}.h5")
        rec.record_open(0.0, 0.001, 4096)
        rec.record_write(0, MiB, 0.01 + r * 1e-4, 0.02 + r * 1e-4)
        ranks.append({"rank": r, "records": [{"path": rec.path, **rec.as_dict()}], "phases": {}})
    written = write_report(reduce_profiles(ranks, run_time=0.1), str(tmp_path))
    assert written == ["timeline.png", "sizes.png", "ranks.png", "files.png", PAGE]
    import matplotlib.image

    for name in written[:-1]:
        height, width = matplotlib.image.imread(str(tmp_path / name)).shape[:2]
        assert max(height, width) <= MAX_INCHES * 100, (name, height, width)
    page = (tmp_path / PAGE).read_text()
    assert "## Per file (30 that moved the most)" in page
    assert page.count("| 1.00 | 0.00 | 1 |") == 200 + 30  # every rank's row, 30 files' rows


def test_where_reports_go(tmp_path: Path) -> None:
    from h5subfile.cli.report import report_folder

    assert report_folder("/p/run.h5.write.json", None, False) == "/p/run.h5.write.report"
    assert report_folder("/p/odd", None, False) == "/p/odd.report"
    assert report_folder("/p/run.h5.write.json", "/out", False) == "/out"
    assert report_folder("/p/run.h5.read.json", "/out", True) == "/out/run.h5.read.report"
