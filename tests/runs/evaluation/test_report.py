"""Reports: metrics.json, report.md, histogram, gallery; merging shards and runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from sam3_agent.runs.evaluation.datasets import Sample, load_samples
from sam3_agent.runs.evaluation.handler import evaluate_samples
from sam3_agent.runs.evaluation.report import report_runs
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.evaluation.selection import select_shard
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.store import ResultStore
from sam3_agent.values.errors import UserError
from tests.support.eval_fixtures import (
    EXPECTED,
    UnionPredictor,
    make_segmenter,
    write_grefcoco,
    write_reasonseg,
    write_refcoco,
)


def _config(dataset: str, **extra: Any) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "split": "val",
        "mode": "sam3-only",
        "all_texts": False,
        "shard": None,
        "model": None,
        "sam3": "fake-sam3",
        "agent": {"score_threshold": 0.5},
        **extra,
    }


def _run(
    samples: Sequence[Sample],
    run_dir: Path,
    config: dict[str, Any],
    *,
    planned: bool = True,
    population: int | None = None,
) -> Path:
    """``samples`` evaluated into ``run_dir``; ``population``: the whole split's size, as
    ``eval`` records it (None: a run directory from before it was recorded)."""
    shared = SharedEmbeddings(make_segmenter())
    with ResultStore.create_or_resume(run_dir, config, SampleResult.from_json) as store:
        if planned:
            store.set_planned(len(samples))
        if population is not None:
            store.set_meta("population", {"samples": population, "tags": {}})
        asyncio.run(evaluate_samples(samples, store, UnionPredictor(shared), shared=shared))
    return run_dir


def _metrics(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_reasonseg_report(tmp_path: Path) -> None:
    samples = load_samples("reasonseg", write_reasonseg(tmp_path / "rs"), "val")
    run = _run(samples, tmp_path / "run", _config("reasonseg"))
    files = report_runs([run], run, gallery_size=2)

    doc = _metrics(files.metrics_json)
    (method,) = doc["methods"]
    overall = method["metrics"]["overall"]
    want = EXPECTED["reasonseg"]
    assert overall["gIoU"] == pytest.approx(want["gIoU"])
    assert overall["cIoU"] == pytest.approx(want["cIoU"])
    assert overall["precision"]["Pr@0.5"] == pytest.approx(0.25)
    short = method["metrics"]["splits"]["val"]["tags"]["short"]
    assert (short["gIoU"], short["cIoU"]) == pytest.approx(want["short"])
    assert method["metrics"]["failed"] == [
        {"id": "val/d#0", "failure": "SegmenterError: scripted SAM 3 failure"}
    ]
    assert method["usage"]["samples"] == 4

    md = files.report_md.read_text()
    assert "## ReasonSeg" in md
    assert "| method | val gIoU | val cIoU |" in md
    assert "| SAM 3 only (fake-sam3) | 30.0 | 48.7 |" in md
    assert "| SAM 3 only (fake-sam3) | val | 25.0 | 25.0 | 25.0 | 25.0 | 25.0 |" in md
    assert "`val/d#0`: SegmenterError: scripted SAM 3 failure" in md
    assert "![IoU histogram](iou_hist.png)" in md

    assert files.histogram is not None
    assert Image.open(files.histogram).format == "PNG"
    # Worst two: the failed sample and the one answered with nothing (IoU 0, U 100 each).
    assert len(files.gallery) == 2
    for path in files.gallery:
        assert path.parent == run / "gallery"
        assert Image.open(path).size[0] > 60
        assert f"gallery/{path.name}" in md


def test_reasonseg_table_has_the_paper_layout(tmp_path: Path) -> None:
    root = write_reasonseg(tmp_path / "rs")
    write_reasonseg(root, split="test")
    runs = [
        _run(
            load_samples("reasonseg", root, split),
            tmp_path / split,
            _config("reasonseg", split=split),
        )
        for split in ("test", "val")
    ]
    md = report_runs(runs, tmp_path / "out").report_md.read_text()
    header = (
        "| method | val gIoU | val cIoU | test short gIoU | test short cIoU | test long gIoU "
        "| test long cIoU | test overall gIoU | test overall cIoU |"
    )
    assert header in md
    # val overall 30.0 / 48.7; test short 10.0 / 15.8, long 50.0 / 80.0, overall 30.0 / 48.7
    assert (
        "| SAM 3 only (fake-sam3) | 30.0 | 48.7 | 10.0 | 15.8 | 50.0 | 80.0 | 30.0 | 48.7 |" in md
    )


def test_grefcoco_report_has_n_acc_and_t_acc(tmp_path: Path) -> None:
    samples = load_samples("grefcoco", write_grefcoco(tmp_path / "g"), "val")
    run = _run(samples, tmp_path / "run", _config("grefcoco"))
    files = report_runs([run], tmp_path / "out")
    overall = _metrics(files.metrics_json)["methods"][0]["metrics"]["overall"]
    want = EXPECTED["grefcoco"]
    for key in ("gIoU", "cIoU", "N-acc", "T-acc"):
        assert overall[key] == pytest.approx(want[key]), key
    md = files.report_md.read_text()
    assert "| method | val gIoU | val cIoU | val N-acc | val T-acc |" in md
    assert "| 50.0 | 50.0 | 50.0 | 50.0 |" in md


def test_shards_merge_to_the_whole_run(tmp_path: Path) -> None:
    samples = load_samples("refcoco", write_refcoco(tmp_path / "r"), "val")
    whole = _run(samples, tmp_path / "whole", _config("refcoco"))
    shards = [
        _run(select_shard(samples, i, 2), tmp_path / f"s{i}", _config("refcoco", shard=f"{i}/2"))
        for i in range(2)
    ]
    merged = report_runs(shards, tmp_path / "merged")
    single = report_runs([whole], whole)
    m = _metrics(merged.metrics_json)["methods"]
    s = _metrics(single.metrics_json)["methods"]
    assert len(m) == 1
    assert m[0]["metrics"] == s[0]["metrics"]
    assert m[0]["metrics"]["overall"]["gIoU"] == pytest.approx(EXPECTED["refcoco"]["gIoU"])
    assert m[0]["metrics"]["overall"]["cIoU"] == pytest.approx(EXPECTED["refcoco"]["cIoU"])
    assert m[0]["usage"]["planned"] == 3


def test_splits_and_models_become_columns_and_rows(tmp_path: Path) -> None:
    root = write_refcoco(tmp_path / "r")
    val = load_samples("refcoco", root, "val")
    test_a = load_samples("refcoco", root, "testA")
    runs = [
        _run(val, tmp_path / "a_val", _config("refcoco")),
        _run(test_a, tmp_path / "a_testA", _config("refcoco", split="testA")),
        _run(val, tmp_path / "b_val", _config("refcoco", mode="agent", model="vlm-x")),
    ]
    files = report_runs(runs, tmp_path / "out")
    md = files.report_md.read_text()
    assert "| method | val gIoU | val cIoU | testA gIoU | testA cIoU |" in md
    assert "| SAM 3 only (fake-sam3) | 46.4 | 53.8 | 100.0 | 100.0 |" in md
    assert "| vlm-x + SAM 3 agent | 46.4 | 53.8 | – | – |" in md


def test_sample_in_two_directories_counts_once(tmp_path: Path) -> None:
    samples = load_samples("refcoco", write_refcoco(tmp_path / "r"), "val")
    a = _run(samples, tmp_path / "a", _config("refcoco", shard="0/2"))
    b = _run(samples[:1], tmp_path / "b", _config("refcoco", shard="1/2"))
    doc = _metrics(report_runs([a, b], tmp_path / "out").metrics_json)
    assert doc["methods"][0]["metrics"]["overall"]["count"] == 3


def test_report_refuses_non_run_directory(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a run directory"):
        report_runs([tmp_path], tmp_path)
    with pytest.raises(UserError, match="at least one"):
        report_runs([], tmp_path)


def test_gallery_skips_missing_images(tmp_path: Path) -> None:
    root = write_reasonseg(tmp_path / "rs")
    samples = load_samples("reasonseg", root, "val")
    run = _run(samples, tmp_path / "run", _config("reasonseg"))
    for image in (root / "val").glob("*.jpg"):
        image.unlink()
    files = report_runs([run], run)
    assert files.gallery == []
    assert "Worst samples" not in files.report_md.read_text()


def test_each_dataset_gets_its_section_and_labels_stay_plain(tmp_path: Path) -> None:
    rs = load_samples("reasonseg", write_reasonseg(tmp_path / "rs"), "val")
    gref = load_samples("grefcoco", write_grefcoco(tmp_path / "g"), "val")
    runs = [
        _run(rs, tmp_path / "rs_run", _config("reasonseg")),
        _run(gref, tmp_path / "g_run", _config("grefcoco")),
    ]
    files = report_runs(runs, tmp_path / "out")
    md = files.report_md.read_text()
    assert md.index("## ReasonSeg") < md.index("## gRefCOCO")
    assert "[2]" not in md
    assert [m.label for m in files.methods] == ["SAM 3 only (fake-sam3)"] * 2


# --------------------------------------------------------------------------- published rows


def test_published_rows_sit_beside_the_runs_marked_published(tmp_path: Path) -> None:
    root = write_reasonseg(tmp_path / "rs")
    write_reasonseg(root, split="test")
    runs = [
        _run(
            load_samples("reasonseg", root, split),
            tmp_path / split,
            _config("reasonseg", split=split, mode="agent", model="Qwen/Qwen2.5-VL-7B-Instruct"),
        )
        for split in ("val", "test")
    ]
    files = report_runs(runs, tmp_path / "report")
    md = files.report_md.read_text()
    header = (
        "| method | val gIoU | val cIoU | test short gIoU | test short cIoU | test long gIoU | "
        "test long cIoU | test overall gIoU | test overall cIoU |"
    )
    assert header in md
    assert "| SAM 3 Agent, Qwen2.5-VL 7B (published) | 62.2 | – | – | – | – | – | 63.0 | – |" in md
    assert "| SAM 3 Agent, Gemini 2.5 Pro (published) | 77.0 | – | – | – | – | – | 74.0 | – |" in md
    assert "arXiv 2511.16719" in md
    # The run's MLLM is the paper's Qwen2.5-VL 7B: its difference is shown.
    assert "### Against the published figures (same MLLM)" in md
    label = "Qwen/Qwen2.5-VL-7B-Instruct + SAM 3 agent"
    assert f"| {label} | Qwen2.5-VL 7B | val | gIoU | 30.0 | 62.2 | -32.2 |" in md
    assert f"| {label} | Qwen2.5-VL 7B | test | gIoU | 30.0 | 63.0 | -33.0 |" in md
    doc = _metrics(files.metrics_json)
    assert {(c["split"], c["difference"]) for c in doc["compared_with_published"]} == {
        ("val", -32.2),
        ("test", -33.0),
    }
    assert len(doc["published"]) == 6 and all(r["source"] for r in doc["published"])
    assert len(doc["methods"]) == 1  # val and test of one model: one row


def test_no_comparison_for_another_model_or_sam3_alone(tmp_path: Path) -> None:
    root = write_reasonseg(tmp_path / "rs")
    samples = load_samples("reasonseg", root, "val")
    runs = [
        _run(
            samples,
            tmp_path / "other",
            _config("reasonseg", mode="agent", model="Qwen/Qwen3-VL-8B-Instruct"),
        ),
        _run(samples, tmp_path / "alone", _config("reasonseg")),
    ]
    md = report_runs(runs, tmp_path / "report").report_md.read_text()
    assert "(published)" in md
    assert "Against the published figures" not in md  # 8B Instruct is not the Thinking model


def test_datasets_without_published_figures_get_no_published_rows(tmp_path: Path) -> None:
    samples = load_samples("refcoco", write_refcoco(tmp_path / "rc"), "val")
    run = _run(samples, tmp_path / "run", _config("refcoco"))
    assert "(published)" not in report_runs([run], run).report_md.read_text()


def test_published_matching_by_normalised_model_name() -> None:
    from sam3_agent.runs.evaluation.published import PUBLISHED, matches, normalise_model

    assert normalise_model("Qwen/Qwen2.5-VL-7B-Instruct") == "qwen2.5-vl-7b-instruct"
    thinking = next(r for r in PUBLISHED if r.model == "Qwen3-VL 8B Thinking")
    assert matches(thinking, "Qwen/Qwen3-VL-8B-Thinking")
    assert not matches(thinking, "Qwen/Qwen3-VL-8B-Instruct")
    gemini = next(r for r in PUBLISHED if r.dataset == "refcoco+")
    assert (gemini.metric, gemini.value, gemini.split) == ("cIoU", 67.3, "val")
    assert matches(gemini, "gemini-2.5-pro") and not matches(gemini, None)


# --------------------------------------------------------------------------- coverage

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"


def _agent(**extra: Any) -> dict[str, Any]:
    return _config("reasonseg", mode="agent", model=QWEN, **extra)


def test_one_shard_beside_the_published_figures_is_partial(tmp_path: Path) -> None:
    samples = load_samples("reasonseg", write_reasonseg(tmp_path / "rs"), "val")
    shards = [
        _run(select_shard(samples, i, 2), tmp_path / f"s{i}", _agent(shard=f"{i}/2"), population=4)
        for i in range(2)
    ]
    one = report_runs(shards[:1], tmp_path / "one")
    scored = len(select_shard(samples, 0, 2))
    text = f"{scored}/4 ({100 * scored // 4}%)"
    assert [c.coverage.text for c in one.comparisons] == [text]
    assert one.partial_warning == (
        "compared with published figures of whole splits on part of the split: "
        f"{QWEN} + SAM 3 agent val {text}"
    )
    md = one.report_md.read_text()
    assert f"**Warning:** {one.partial_warning}." in md
    assert "| method | val gIoU | val cIoU | samples scored |" in md
    assert f"| val {text} |" in md  # the run's row of the main table
    assert "| SAM 3 Agent, Qwen2.5-VL 7B (published) | 62.2 | – | whole split |" in md
    assert f"| {one.comparisons[0].difference:+.1f} | {text} |" in md  # the comparison

    both = report_runs(shards, tmp_path / "both")  # the shards merged: the whole split
    assert [c.coverage.text for c in both.comparisons] == ["4/4 (100%)"]
    assert both.partial_warning is None
    doc = _metrics(both.metrics_json)
    assert doc["partial_warning"] is None
    assert doc["compared_with_published"][0]["coverage"] == {
        "scored": 4, "total": 4, "of": "split", "partial": False, "text": "4/4 (100%)",
    }  # fmt: skip
    assert doc["methods"][0]["coverage"]["val"]["text"] == "4/4 (100%)"


def test_without_a_recorded_split_size_the_report_says_so(tmp_path: Path) -> None:
    """Run directories made before eval recorded the split: the plan where there is one
    (named as such), else "total unknown"; never a silent 100%."""
    root = write_reasonseg(tmp_path / "rs")
    write_reasonseg(root, split="test")
    val = _run(load_samples("reasonseg", root, "val"), tmp_path / "val", _agent())
    test = _run(
        load_samples("reasonseg", root, "test")[:2],
        tmp_path / "test",
        _agent(split="test"),
        planned=False,
    )
    files = report_runs([val, test], tmp_path / "out")
    texts = {c.published.split: c.coverage.text for c in files.comparisons}
    assert texts == {
        "val": "4/4 (100%) of the run's plan, split size not recorded",
        "test": "2 scored, total unknown",
    }
    assert files.partial_warning is not None
    assert files.partial_warning.startswith("coverage of the split unknown for ")
    assert "test (2 scored, total unknown)" in files.partial_warning


def test_runs_without_published_figures_get_no_coverage_column(tmp_path: Path) -> None:
    samples = load_samples("refcoco", write_refcoco(tmp_path / "rc"), "val")
    run = _run(samples[:1], tmp_path / "run", _config("refcoco"), population=3)
    files = report_runs([run], run)
    assert files.partial_warning is None  # nothing published to be misread against
    assert "samples scored" not in files.report_md.read_text()
    assert _metrics(files.metrics_json)["methods"][0]["coverage"]["val"]["text"] == "1/3 (33%)"


def test_histogram_legend_says_how_much_of_the_split_it_draws(tmp_path: Path) -> None:
    from sam3_agent.runs.evaluation.figures import legend_label

    samples = load_samples("reasonseg", write_reasonseg(tmp_path / "rs"), "val")
    run = _run(samples[:1], tmp_path / "run", _agent(), population=4)
    (method,) = report_runs([run], run).methods
    assert legend_label(method) == f"{QWEN} + SAM 3 agent: 1/4 (25%)"
