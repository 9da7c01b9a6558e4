"""Per-sample differences between two runs (the tool-set ablation): which samples, both
figures and the change, largest first, capped, in report.md, metrics.json and the summary."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.runs.evaluation.differences import EPSILON, SHOWN, compare_samples
from sam3_agent.runs.evaluation.methods import Method
from sam3_agent.runs.evaluation.report import ReportFiles, report_runs
from sam3_agent.runs.evaluation.results import SampleResult, VideoSampleResult
from sam3_agent.runs.jobs.store import ResultStore
from tests.support.eval_fixtures import ABLATION_MODEL, write_ablation_runs

QWEN = ABLATION_MODEL
PAPER = f"{QWEN} + SAM 3 agent"
EXTENDED = f"{QWEN} + SAM 3 agent (extended tools)"


def _ablation(tmp_path: Path, copies: int = 1) -> ReportFiles:
    return report_runs(write_ablation_runs(tmp_path, copies), tmp_path / "report")


def test_two_tool_sets_side_by_side_with_the_samples_that_differ(tmp_path: Path) -> None:
    files = _ablation(tmp_path)
    assert [m.label for m in files.methods] == [PAPER, EXTENDED]
    md = files.report_md.read_text()
    assert f"| {PAPER} | 30.0 |" in md and f"| {EXTENDED} | 75.0 |" in md  # side by side
    section = md[md.index("## Per-sample differences") :]
    assert section.split("\n", 1)[1].startswith(
        f"\n### {EXTENDED} against {PAPER} (reasonseg)\n\n"
        "3 of 4 samples differ in IoU (by more than 0.001, or in failing).\n\n"
        f"| sample | {PAPER} | {EXTENDED} | difference |\n|---|---|---|---|\n"
        "| val/c#0 | 0.000 | 1.000 | +1.000 |\n"
        "| val/a#0 | 0.200 | 1.000 | +0.800 |\n"
        "| val/d#0 | 0.000 (failed) | 0.000 | +0.000 |\n"
    )
    assert "val/b#0" not in section  # the same in both runs

    (entry,) = json.loads(files.metrics_json.read_text())["sample_differences"]
    assert entry == {
        "baseline": PAPER, "method": EXTENDED, "dataset": "reasonseg", "metric": "IoU",
        "epsilon": EPSILON, "compared": 4, "unmatched": 0, "differing": 3, "more": 0,
        "samples": [
            {"id": "val/c#0", "baseline": 0.0, "other": 1.0, "delta": 1.0,
             "baseline_failed": False, "other_failed": False},
            {"id": "val/a#0", "baseline": 0.2, "other": 1.0, "delta": 0.8,
             "baseline_failed": False, "other_failed": False},
            {"id": "val/d#0", "baseline": 0.0, "other": 0.0, "delta": 0.0,
             "baseline_failed": True, "other_failed": False},
        ],
    }  # fmt: skip
    start = files.summary.index(
        f"{EXTENDED} against {PAPER}: reasonseg: "
        "3 of 4 samples differ in IoU (by more than 0.001, or in failing)"
    )
    assert files.summary[start + 1 : start + 4] == [
        "  val/c#0: 0.000 -> 1.000 (+1.000)",
        "  val/a#0: 0.200 -> 1.000 (+0.800)",
        "  val/d#0: 0.000 (failed) -> 0.000 (+0.000)",
    ]


def test_the_list_is_capped_with_a_count_of_the_rest(tmp_path: Path) -> None:
    files = _ablation(tmp_path, copies=8)  # 32 samples, 24 of them differ
    (entry,) = json.loads(files.metrics_json.read_text())["sample_differences"]
    assert (entry["compared"], entry["differing"], entry["more"]) == (32, 24, 24 - SHOWN)
    assert len(entry["samples"]) == SHOWN
    deltas = [abs(s["delta"]) for s in entry["samples"]]
    assert deltas == sorted(deltas, reverse=True)
    assert deltas[:8] == [1.0] * 8 and deltas[8:16] == [0.8] * 8  # every c, then every a
    md = files.report_md.read_text()
    assert f"... and {24 - SHOWN} more (the {SHOWN} largest are listed)." in md
    assert md.count("| +0.000 |") == SHOWN - 16  # only as many failure flips as fit
    assert files.summary[-1] == f"  ... and {24 - SHOWN} more"


def test_one_run_has_no_per_sample_section(tmp_path: Path) -> None:
    paper, _ = write_ablation_runs(tmp_path)
    files = report_runs([paper], paper)
    assert "Per-sample differences" not in files.report_md.read_text()
    assert json.loads(files.metrics_json.read_text())["sample_differences"] == []


def _video_run(run_dir: Path, tool_set: str, scores: dict[str, tuple[float, float, bool]]) -> Path:
    config = {"kind": "video", "dataset": "mevis", "split": "valid_u", "mode": "agent",
              "model": QWEN, "agent": {"tool_set": tool_set}}  # fmt: skip
    with ResultStore.create_or_resume(run_dir, config, VideoSampleResult.from_json) as store:
        for sample_id, (j, f, failed) in scores.items():
            status = "failed" if failed else "masks"
            store.commit(VideoSampleResult(
                id=sample_id, image_path="v", query="q", status=status, split="valid_u",
                tags=(), no_target=False, j=j, f=f, frames_scored=3,
            ))  # fmt: skip
    return run_dir


def test_video_runs_differ_in_j_and_f(tmp_path: Path) -> None:
    paper = _video_run(tmp_path / "paper", "paper", {
        "v1#0": (0.5, 0.7, False), "v2#0": (0.9, 0.9, False), "v3#0": (0.0, 0.0, True),
        "v4#0": (0.4, 0.4, False),
    })  # fmt: skip
    extended = _video_run(tmp_path / "extended", "extended", {
        "v1#0": (0.5, 0.7, False), "v2#0": (0.5, 0.3, False), "v3#0": (0.2, 0.4, False),
    })  # fmt: skip
    files = report_runs([paper, extended], tmp_path / "report")
    (entry,) = json.loads(files.metrics_json.read_text())["sample_differences"]
    assert (entry["metric"], entry["compared"], entry["unmatched"]) == ("J&F", 3, 1)
    assert [(s["id"], s["delta"]) for s in entry["samples"]] == [("v2#0", -0.5), ("v3#0", 0.3)]
    md = files.report_md.read_text()
    assert "2 of 3 samples differ in J&F (by more than 0.001, or in failing); " in md
    assert "| v2#0 | 0.900 | 0.400 | -0.500 |" in md
    assert "| v3#0 | 0.000 (failed) | 0.300 | +0.300 |" in md


def _method(label: str, figures: list[tuple[int, bool]]) -> Method:
    """A method whose sample ``s<i>`` scores ``intersection / 100`` (failed or not)."""
    results = [
        SampleResult(id=f"s{i:02d}", image_path="x", query="q", status="failed" if failed
                     else "masks", split="val", tags=(), no_target=False, intersection=inter,
                     union=100, pred_area=inter, gt_area=100)
        for i, (inter, failed) in enumerate(figures)
    ]  # fmt: skip
    return Method(label, {"dataset": "refcoco"}, [], results, None, {}, {})


figures = st.lists(st.tuples(st.integers(0, 100), st.booleans()), max_size=30)


@given(st.data())
def test_a_sample_is_listed_when_its_iou_or_its_failing_changes(data: st.DataObject) -> None:
    before = data.draw(figures)
    after = data.draw(st.lists(st.tuples(st.integers(0, 100), st.booleans()),
                               min_size=len(before), max_size=len(before)))  # fmt: skip
    found = compare_samples(_method("a", before), _method("b", after))
    expected = {
        f"s{i:02d}"
        for i, ((x, xf), (y, yf)) in enumerate(zip(before, after, strict=True))
        if x != y or xf != yf
    }
    assert {s.id for s in found.samples} == expected
    assert [abs(s.delta) for s in found.samples] == sorted(
        (abs(s.delta) for s in found.samples), reverse=True
    )
    assert all(s.other - s.baseline == s.delta for s in found.samples)
    assert (found.compared, found.unmatched) == (len(before), 0)
