"""One evaluation pipeline for images and videos: one handler base, one worker factory, one
report entry point and one running tally, parameterised by the medium and its metric."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.runs.evaluation.handler import (
    EvalHandler,
    EvalWorkerFactory,
    SampleHandler,
    VideoEvalHandler,
)
from sam3_agent.runs.evaluation.report import report_runs
from sam3_agent.runs.evaluation.results import running_metrics
from sam3_agent.runs.evaluation.run import evaluate
from sam3_agent.runs.evaluation.selection import VideoEvalSet
from sam3_agent.runs.evaluation.video.metrics import ScoredVideo, VideoScore, breakdown
from sam3_agent.values.config import AgentConfig, VideoOptions
from tests.support.video_datasets import make_revos
from tests.support.video_eval_fixtures import FakeVideoBackends


def test_image_and_video_handlers_are_one_handler_given_the_medium() -> None:
    assert issubclass(EvalHandler, SampleHandler)
    assert issubclass(VideoEvalHandler, SampleHandler)


def test_one_worker_factory_builds_the_video_handler_when_given_video_options(
    tmp_path: Path,
) -> None:
    backends = FakeVideoBackends()
    factory = EvalWorkerFactory(backends, AgentConfig(), sam3_only=False, video=VideoOptions())
    handler = factory.build(tmp_path)
    assert isinstance(handler, VideoEvalHandler)
    assert backends.built == ["video segmenter", "chat model"]


def test_one_report_entry_point_reports_video_runs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    evaluate(VideoEvalSet("revos", make_revos(tmp_path / "data")), run, FakeVideoBackends())
    files = report_runs([run], tmp_path / "report")
    assert files.report_md.read_text().startswith("# sam3-agent video evaluation report")
    assert files.histogram is None and files.gallery == []
    assert files.summary[0].startswith("scripted + SAM 3 video agent: ReVOS valid: 3 samples")


def test_running_metrics_are_chosen_by_the_datasets_metric() -> None:
    assert [name for name, _ in running_metrics("refcoco").figures()] == ["gIoU", "cIoU"]
    assert running_metrics("revos").figures() == [("J", None), ("F", None), ("J&F", None)]


score = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
tags = st.lists(st.sampled_from(["referring", "reasoning", "type-2"]), unique=True)
videos = st.lists(st.tuples(score, score, tags, st.booleans()), min_size=1, max_size=12)


@pytest.mark.parametrize("overall_from", [None, ("referring", "reasoning")])
@given(items=videos)
def test_running_video_figures_equal_the_reports_overall(
    overall_from: tuple[str, ...] | None, items: list[tuple[float, float, list[str], bool]]
) -> None:
    scored = [
        ScoredVideo(f"v{i}", tuple(t), VideoScore(j, f, 1), failed)
        for i, (j, f, t, failed) in enumerate(items)
    ]
    running = running_metrics("revos" if overall_from else "ref-davis17")
    for video in scored:
        running.add(video)  # type: ignore[arg-type]
    overall = breakdown(scored, overall_from=overall_from).overall
    figures = dict(running.figures())
    for name, value in (("J", overall.j), ("F", overall.f), ("J&F", overall.jf)):
        assert figures[name] == (None if value is None else pytest.approx(value))
    assert running.failed == sum(v.failed for v in scored)


def test_one_report_module_holds_the_image_and_the_video_report() -> None:
    """The video report is a section of ``report.py`` beside the image one, not a second
    module repeating its header, imports and pipeline."""
    import importlib.util

    from sam3_agent.runs.evaluation import report

    assert importlib.util.find_spec("sam3_agent.runs.evaluation.video.report") is None
    assert {"report_runs", "_dataset_section", "_video_section"} <= set(vars(report))
