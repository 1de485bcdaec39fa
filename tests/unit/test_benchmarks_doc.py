"""docs/BENCHMARKS.md (the reference) and docs/BENCHMARKS-HISTORY.md are what their data gives:
regenerating them from docs/*.json reproduces the committed files exactly, every number of the
summary appears in a table row below it, the summary follows docs/metadata-scaling.json when that
file is measured again, every link between the two leads to a heading, and every section that
the code or the docs name in either file is a heading of that file.

No MPI, no matplotlib, no measurement: only ``benchmarks/report.py``'s rendering.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import metadata_scaling  # noqa: E402
import report  # noqa: E402

NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def summary_and_body(text: str) -> tuple[str, str]:
    head, rest = text.split(report.SUMMARY_BEGIN, 1)
    summary, tail = rest.split(report.SUMMARY_END, 1)
    return summary, head + tail


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def untraced(text: str) -> list[str]:
    """Numbers of the summary's rows that no table row of the rest of the document shows."""
    summary, body = summary_and_body(text)
    rows = "\n".join(table_rows(body))
    missing = []
    for line in table_rows(summary)[2:]:
        question, answer = line.split(" | ")[:2]
        for number in NUMBER.findall(answer.replace("**", "")):
            pattern = r"(?<![\d.])" + re.escape(number) + r"(?![\d])"
            if not re.search(pattern, rows):
                missing.append(number)
    return missing


@pytest.fixture(scope="module")
def data() -> dict[str, dict]:
    return report.load()


def test_regenerating_reproduces_the_committed_document(data: dict[str, dict]) -> None:
    expected = report.build(data)
    assert report.MARKDOWN.read_text() == expected, (
        "docs/BENCHMARKS.md differs from what docs/*.json give: run "
        ".venv/bin/python benchmarks/report.py"
    )


def test_regenerating_reproduces_the_committed_history(data: dict[str, dict]) -> None:
    assert report.HISTORY_MARKDOWN.read_text() == report.build_history(data), (
        "docs/BENCHMARKS-HISTORY.md differs from what docs/*.json give: run "
        ".venv/bin/python benchmarks/report.py"
    )


def headings(path: Path) -> list[str]:
    """The anchors of a Markdown file's headings, as report.anchor makes GitHub's."""
    return [
        report.anchor(line.lstrip("#").strip())
        for line in path.read_text().splitlines()
        if line.startswith("#")
    ]


def test_every_link_between_the_two_documents_leads_to_a_heading() -> None:
    documents = (report.MARKDOWN, report.HISTORY_MARKDOWN)
    broken = []
    for path in documents:
        for target, fragment in re.findall(
            r"\]\(((?:BENCHMARKS[-A-Z]*\.md)?)(#[^)]+)\)", path.read_text()
        ):
            other = path if not target else report.DOCS / target
            if fragment not in headings(other):
                broken.append(f"{path.name}: {target}{fragment}")
    assert broken == []


#: "docs/BENCHMARKS.md, *Section*" or "docs/BENCHMARKS-HISTORY.md, *Section*" (then perhaps
#: ", run *Subsection*" or ", *Subsection*"), across line breaks
NAMED = re.compile(
    r"docs/(BENCHMARKS(?:-HISTORY)?\.md),?\s+\*([^*]+)\*(?:,\s+(?:run\s+)?\*([^*]+)\*)?"
)


def test_every_section_named_elsewhere_is_a_heading_of_the_file_named() -> None:
    """Code comments, docstrings and docs cite a measurement as "docs/BENCHMARKS.md, *Title*":
    the title must be the start of a heading of that file (the reference or the history)."""
    tracked = subprocess.run(
        ["git", "ls-files", "src", "docs", "README.md", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    titles = {
        name: [line.lstrip("#").strip() for line in (report.DOCS / name).read_text().splitlines()
               if line.startswith("#")]
        for name in (report.MARKDOWN.name, report.HISTORY_MARKDOWN.name)
    }  # fmt: skip
    missing = []
    for file in tracked:
        if not file.endswith((".py", ".md")) or file.startswith("docs/BENCHMARKS"):
            continue
        text = re.sub(r"\n\s*(?:#:?|>)?\s*", " ", (ROOT / file).read_text())
        for name, *named in NAMED.findall(text):
            for title in filter(None, named):
                if not any(t.startswith(title.strip()) for t in titles[name]):
                    missing.append(f"{file}: {name}, *{title}*")
    assert missing == []


def test_every_summary_number_appears_in_a_table_row(data: dict[str, dict]) -> None:
    text = report.build(data)
    summary, _ = summary_and_body(text)
    assert len(table_rows(summary)) > 8
    assert untraced(text) == []


def test_every_figure_is_captioned_and_drawn(data: dict[str, dict]) -> None:
    lines = report.build(data).splitlines()
    images = [i for i, line in enumerate(lines) if line.startswith("![")]
    assert len(images) >= 10
    for i in images:
        name = re.search(r"\(figures/([^)]+)\)", lines[i])
        assert name, lines[i]
        assert (report.FIGURES / name.group(1)).exists(), name.group(1)
        assert lines[i + 2].startswith("*Figure "), lines[i]
        assert "min" in lines[i + 2] and "max" in lines[i + 2], lines[i + 2]


def test_sections_on_other_software_say_so(data: dict[str, dict]) -> None:
    text = report.build(data)
    for title in (report.PAPER_TITLE, "Metadata at scale"):
        section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        assert "**Different software from `make`.**" in section, title
    assert (
        "Different software" not in text.split("## Storage strategies\n", 1)[1].split("\n## ", 1)[0]
    )


def test_claims_that_contradicted_the_tables_are_gone(data: dict[str, dict]) -> None:
    text = report.build(data)
    for claim in ("45-90 ms", "cost little", "costs nothing measurable", "varies 2-3x"):
        assert claim not in text


def scaled_run(run: dict, factor: float, ranks: set[int] | None) -> dict:
    """A copy of ``run`` with every time multiplied by ``factor`` (only ``ranks`` kept)."""
    new = copy.deepcopy(run)
    new["scaling"] = [r for r in new["scaling"] if ranks is None or r["ranks"] in ranks]
    for r in new["scaling"] + new["whole"]:
        for key in ("metadata_seconds", "observed_seconds", "raw_seconds"):
            if key in r:
                r[key] *= factor
    new.pop("notes", None)
    return new


@pytest.mark.parametrize(
    "ranks, whole",
    [(None, True), ({8, 16, 32}, False), ({8, 32, 128, 256}, True)],
)
def test_summary_follows_a_new_metadata_measurement(
    data: dict[str, dict], ranks: set[int] | None, whole: bool
) -> None:
    """When docs/metadata-scaling.json gains a run (another label, other rank counts), the
    summary reports that run, and its numbers still appear in the tables below it."""
    changed = copy.deepcopy(data)
    base = next(iter(changed["metadata"]["runs"].values()))
    run = scaled_run(base, 1.7, ranks)
    if ranks and 256 in ranks:  # a rank count never measured before: copy 128's samples
        run["scaling"] += [dict(r, ranks=256) for r in run["scaling"] if r["ranks"] == 128]
    if not whole:
        run["whole"] = []
    changed["metadata"]["runs"]["measured again"] = run
    text = report.build(changed)
    summary, _ = summary_and_body(text)
    assert "measured again" in summary
    top = max(r["ranks"] for r in run["scaling"])
    fpp = metadata_scaling.values(run["scaling"], top, metadata_scaling.FPP, "metadata_seconds")
    assert metadata_scaling.cell(fpp, 3) in summary
    assert ("Whole VPIC-IO write" in summary) == whole
    assert untraced(text) == []


def test_a_number_not_in_the_tables_is_caught(data: dict[str, dict]) -> None:
    text = report.build(data)
    summary, _ = summary_and_body(text)
    altered = summary.replace("0.13", "0.1399", 1)
    assert altered != summary
    assert untraced(text.replace(summary, altered)) == ["0.1399"]


def test_the_repack_crossover_follows_the_ratios(data: dict[str, dict]) -> None:
    runs = copy.deepcopy(report.repack_runs(data))
    key = "repack 2 ranks"
    names = [report.repack_experiment.size_name(r["input"]["bytes"]) for r in runs]
    assert names == ["512 MiB", "1 GiB", "2 GiB"]  # smallest first

    def said(*ratios: float) -> str:
        for run, ratio in zip(runs, ratios):
            run["summary"][key]["speedup_median"] = ratio
            null = [0.9, 0.95, 1.0, 1.05, 1.1]  # the null's ratios: middle half 0.925-1.075
            run["times"]["h5repack"] = [1.0] * len(null)
            run["times"]["h5repack again"] = [1 / r for r in null]
        return report.repack_crossover(runs, key)

    faster, slower = report.REPACK_VERDICTS["faster"], report.REPACK_VERDICTS["slower"]
    level = report.REPACK_VERDICTS["level"]
    assert said(0.7, 1.2, 1.8) == f"{slower} at 512 MiB; {faster} at 1 GiB, 2 GiB"
    assert said(0.7, 1.05, 1.8) == f"{slower} at 512 MiB; {level} at 1 GiB; {faster} at 2 GiB"
    assert said(0.95, 1.05, 1.07) == f"{level} at 512 MiB, 1 GiB, 2 GiB"
    assert said(1.2, 1.3, 1.8) == f"{faster} at 512 MiB, 1 GiB, 2 GiB"
    assert said(0.7, 1.2, 0.8) == f"{slower} at 512 MiB; {faster} at 1 GiB; {slower} at 2 GiB"


def test_every_link_of_the_summary_leads_to_a_heading_of_the_document() -> None:
    """One click from a summary number to its section or table: every ``(#anchor)`` of the
    summary is the anchor of exactly one heading (GitHub's, as report.anchor makes it)."""
    text = report.MARKDOWN.read_text()
    summary, _ = summary_and_body(text)
    headings = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    anchors = [report.anchor(h) for h in headings]
    links = re.findall(r"\]\((#[^)]+)\)", summary)
    assert links
    assert [link for link in links if anchors.count(link) != 1] == []


def test_the_best_possible_overlap_hides_every_write_but_the_last_steps() -> None:
    """4 steps of 0.5 s per step with 0.5 s of compute after each but the last: the default
    takes T = 2 s, C = 1.5 s, so writing behind can at best take 1.5 + 0.5 / 4 = 1.625 s."""
    import write_patterns

    data = {
        "samples": [
            {"rep": 0, "command": "steps_default", "checkout": "NEW", "value": 0.5},
            {"rep": 1, "command": "steps_default", "checkout": "NEW", "value": 0.4},
        ]
    }
    assert write_patterns.steps_and_compute("steps_default") == (4, 0.5)
    assert write_patterns.steps_and_compute("t16m_subfiles2") is None
    bounds = write_patterns.best_overlap(data, "steps_default", "NEW")
    assert bounds == pytest.approx([1.625 / 2.0, (1.5 + 0.1 / 4) / 1.6])
    assert write_patterns.best_overlap(data, "t16m_subfiles2", "NEW") == []


def test_the_best_write_behind_hides_every_write_but_the_last_steps() -> None:
    """The issue's figures: a direct step of 0.25 s with 0.2 s of compute after 3 of 4 steps
    (C = 0.15 s per step) leaves 0.175 s at best; a write longer than the compute shows."""
    import write_behind

    assert write_behind.best(0.25, 0.2, 4) == pytest.approx(0.175)
    assert write_behind.best(0.55, 0.2, 4) == pytest.approx(0.4)  # W = 0.4 > C: all but C
    samples = [[0, i, 4 * t, 0, 0] for i, t in enumerate([0.25, 0.2, 0.175, 0.25, 0.1, 0.3, 0.18])]
    summary = write_behind.summarise(samples, 1, 0.2, 4)
    assert summary["hidden"]["copy"]["median"] == pytest.approx(0.05 / 0.075)
    assert summary["hidden"]["zero copy"]["median"] == pytest.approx(1.0)
    assert summary["hidden"]["copy always"]["median"] == pytest.approx(-0.05 / 0.075)
    assert summary["write_share"]["median"] == pytest.approx(0.4)


def test_the_latest_value_of_a_measure_comes_from_the_newest_series_that_took_it() -> None:
    import write_patterns

    def series(started: float, ratio: float, commands: list[str]) -> dict:
        samples = [
            {"rep": 0, "command": c, "checkout": k, "value": v, "best": 2 * v}
            for c in commands
            for k in ("BASE", "NEW", "NEW'")
            for v in [ratio if c == "t64k_one_file" else 1.0]
        ]
        return {
            "facts": {"started": started},
            "order": ["BASE", "NEW", "NEW'"],
            "commits": {"BASE": "a", "NEW": "b"},
            "commands": commands,
            "samples": samples,
        }

    old = series(1.0, 0.5, ["t64k_one_file", "t64k_posix_shared", "vpic_2"])
    new = series(2.0, 0.9, ["t64k_one_file", "t64k_posix_shared"])
    rows = {r["measure"]: r for r in write_patterns.latest([new, old])}
    label = "64 KiB transfers, one file / POSIX shared file"
    assert rows[label]["series"] is new and rows[label]["value"].startswith("0.90")
    assert rows[label + write_patterns.BEST]["value"].startswith("0.90")  # 2x over 2x
    vpic = next(r for m, r in rows.items() if m.startswith("VPIC write, 2 ranks"))
    assert vpic["series"] is old
    assert list(rows).index(label) < list(rows).index(label + write_patterns.BEST)
