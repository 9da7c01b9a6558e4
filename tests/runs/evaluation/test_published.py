"""The published AgentRVOS figures: only what a source confirms."""

from __future__ import annotations

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS
from sam3_agent.runs.evaluation.published import PUBLISHED, VIDEO_PUBLISHED, for_dataset, matches
from sam3_agent.runs.evaluation.report_parts import published_entry


def test_agentrvos_figures_as_published() -> None:
    figures = {(r.dataset, r.split, r.tag, r.metric): r.value for r in VIDEO_PUBLISHED}
    assert figures == {
        ("mevis", "", None, "J&F"): 73.1,
        ("reasonvos", "valid", None, "J&F"): 75.5,
        ("revos", "valid", None, "J&F"): 66.3,
    }
    assert all(r.dataset in VIDEO_DATASETS for r in VIDEO_PUBLISHED)
    assert all(not r.split or r.split in VIDEO_DATASETS[r.dataset].splits for r in VIDEO_PUBLISHED)


def test_unconfirmed_mllm_matches_no_run() -> None:
    (revos,) = for_dataset("revos")
    assert revos.label == "AgentRVOS (published)"
    assert not matches(revos, "Qwen/Qwen3-VL-8B-Instruct")
    assert for_dataset("ref-davis17") == []


def test_image_rows_keep_their_label() -> None:
    assert PUBLISHED[0].label == "SAM 3 Agent, Qwen2.5-VL 7B (published)"


def test_one_published_entry_serves_image_and_video_reports() -> None:
    """metrics.json lists an image figure without its method, and a video one with its
    method and an unstated split or model as null, from the one shared function."""
    image = published_entry(PUBLISHED[0])
    assert list(image) == ["model", "dataset", "split", "tag", "metric", "value", "source"]
    assert image["model"] == PUBLISHED[0].model
    mevis = for_dataset("mevis")[0]
    video = published_entry(mevis, "video")
    assert list(video) == ["method", *image]
    assert (video["method"], video["model"], video["split"]) == ("AgentRVOS", None, None)
