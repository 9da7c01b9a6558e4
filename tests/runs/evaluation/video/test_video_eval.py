"""Video evaluation end to end: the video agent over a fake SAM 3 video model and a scripted
MLLM on tiny datasets in their published layouts, through the library's ``evaluate``.

The expected J and F of every sample are worked out in :mod:`tests.support.video_eval_fixtures`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sam3_agent.runs.evaluation.handler import Prediction, score_prediction
from sam3_agent.runs.evaluation.report import report_runs
from sam3_agent.runs.evaluation.results import VideoSampleResult
from sam3_agent.runs.evaluation.run import EvalSet, evaluate
from sam3_agent.runs.evaluation.samples import GroundTruth
from sam3_agent.runs.evaluation.selection import VideoEvalSet, select_shard
from sam3_agent.runs.evaluation.video.datasets import VideoSample, load_video_samples
from sam3_agent.runs.jobs.base import EngineOptions
from sam3_agent.runs.jobs.store import ResultStore, job_dir_name, reading
from sam3_agent.values.config import VideoOptions
from sam3_agent.values.errors import DatasetError, UserError
from sam3_agent.values.tracks import TrackBuilder
from tests.support.video_datasets import (
    FRAMES,
    H,
    W,
    make_mevis,
    make_reasonvos,
    make_ref_davis17,
    make_ref_youtube_vos,
    make_revos,
    object_mask,
)
from tests.support.video_eval_fixtures import (
    DAVIS,
    REVOS,
    FakeVideoBackends,
    metrics,
    stored,
    write_revos_videos,
)


def _records(run: Path) -> dict[str, VideoSampleResult]:
    with reading(run, VideoSampleResult.from_json) as store:
        return {r.id: r for r in store.results()}


class StopAfter:
    """A progress listener that interrupts the run after ``k`` commits (as Ctrl-C would)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.seen = 0
        self.previous: list[str] = []

    def start(self, total: int, already_done: Sequence[VideoSampleResult]) -> None:
        self.previous = [r.id for r in already_done]

    def update(self, result: VideoSampleResult) -> None:
        self.seen += 1
        if self.seen >= self.k:
            raise KeyboardInterrupt


def test_ref_davis17_scores_every_sample_as_worked_out(tmp_path: Path) -> None:
    root = make_ref_davis17(tmp_path / "davis")
    run = tmp_path / "run"
    done = evaluate(VideoEvalSet("ref-davis17", root), run, FakeVideoBackends())
    assert (done.run.ran, done.run.failed) == (4, 0)
    records = _records(run)
    j_and_f = {i.rsplit("/", 1)[1]: (r.j, r.f) for i, r in records.items()}
    # pytest.approx takes no nested containers (pytest 9.2 refuses them): flatten the pairs.
    expected = {"0": (1.0, 1.0), "1": (0.0, 0.0), "2": (0.0, 0.0), "3": (0.5, 2 / 3)}
    assert sorted(j_and_f) == sorted(expected)
    assert [v for k in sorted(j_and_f) for v in j_and_f[k]] == pytest.approx(
        [v for k in sorted(expected) for v in expected[k]]
    )
    (scored,) = metrics(run)
    overall = scored["valid"]["overall"]
    assert (overall["J"], overall["F"]) == pytest.approx((DAVIS["J"], DAVIS["F"]))
    assert overall["J&F"] == pytest.approx((3 / 8 + 5 / 12) / 2)
    for tag in ("annotator-1", "annotator-2"):
        got = scored["valid"]["tags"][tag]
        assert (got["J"], got["F"]) == pytest.approx(DAVIS[tag])
    first = records["valid/d1/0"]
    assert (first.status, first.frames_scored, first.frames_used, first.no_target) == (
        "masks",
        FRAMES,
        FRAMES,
        False,
    )
    assert first.prompt_tokens > 0 and first.rounds == 2 and first.calls >= 2
    assert records["valid/d1/2"].status == "no_mask"
    # The agent's own files, per sample.
    artifacts = run / "samples" / job_dir_name("valid/d1/0")
    assert first.artifacts == str(artifacts.relative_to(run))
    for name in ("result.json", "overlay.mp4", "contact_sheet.png", "trace.jsonl"):
        assert (artifacts / name).is_file(), name
    result = json.loads((artifacts / "result.json").read_text())
    assert result["video"]["frames_used"] == list(range(FRAMES))
    report = done.report.report_md.read_text()
    assert "| scripted + SAM 3 video agent | valid | overall | 4 | 37.5 | 41.7 | 39.6 |" in report


def test_revos_subsets_and_the_official_overall(tmp_path: Path) -> None:
    root = make_revos(tmp_path / "data")
    run = tmp_path / "run"
    done = evaluate(VideoEvalSet("revos", root), run, FakeVideoBackends())
    (scored,) = metrics(run)
    tags = scored["valid"]["tags"]
    assert {t: tags[t]["J&F"] for t in tags} == pytest.approx(
        {"referring": REVOS["referring"], "reasoning": REVOS["reasoning"], "type-2": 1.0}
    )
    # ReVOS's overall: the mean of the referring and reasoning means, type 2 left out.
    assert scored["valid"]["overall"]["J&F"] == pytest.approx(REVOS["overall"])
    assert scored["valid"]["overall_from"] == ["referring", "reasoning"]
    no_target = _records(run)["valid/r1/2"]
    assert no_target.no_target and (no_target.j, no_target.f) == (1.0, 1.0)
    # Beside AgentRVOS's ReVOS valid figure, with the whole split scored: no warning.
    (beside,) = done.report.comparisons
    assert (beside.split, beside.published.value, beside.ours) == ("valid", 66.3, 50.0)
    assert beside.coverage.text == "3/3 (100%)"
    assert done.report.partial_warning is None
    report = done.report.report_md.read_text()
    assert "| AgentRVOS (published) | valid | overall | – | – | – | 66.3 | whole split |" in report
    assert "mean of the referring and reasoning subsets' means" in report


def test_reasonvos_scores_its_annotated_frames_only(tmp_path: Path) -> None:
    root = make_reasonvos(tmp_path / "data")
    run = tmp_path / "run"
    evaluate(VideoEvalSet("reasonvos", root), run, FakeVideoBackends())
    (record,) = _records(run).values()
    assert (record.frames_scored, record.frames_used) == (2, FRAMES)
    assert (record.j, record.f, record.tags) == (1.0, 1.0, ("mevis", "sentence"))


def test_a_failing_sample_is_stored_scored_empty_and_retried(tmp_path: Path) -> None:
    root = make_revos(tmp_path / "data")
    meta = root / "ReVOS" / "meta_expressions_valid_.json"
    doc = json.loads(meta.read_text())
    doc["videos"]["r1"]["expressions"]["0"]["exp"] = "the query that breaks the endpoint"
    meta.write_text(json.dumps(doc))
    run = tmp_path / "run"
    done = evaluate(VideoEvalSet("revos", root), run, FakeVideoBackends())
    assert (done.run.ran, done.run.failed) == (3, 1)
    failed = _records(run)["valid/r1/0"]
    assert failed.status == "failed" and failed.infra_error
    assert failed.failure == "ChatModelError: scripted endpoint failure"
    assert (failed.j, failed.f, failed.frames_scored) == (0.0, 0.0, FRAMES)
    assert "`valid/r1/0`: ChatModelError: scripted endpoint failure" in (
        done.report.report_md.read_text()
    )
    again = evaluate(VideoEvalSet("revos", root), run, FakeVideoBackends(), retry_failed=True)
    assert (again.run.skipped, again.run.ran) == (2, 1)


def test_an_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    root = write_revos_videos(tmp_path / "data", ("r1", "r2"))
    selection = VideoEvalSet("revos", root)
    whole = tmp_path / "whole"
    evaluate(selection, whole, FakeVideoBackends(), engine=EngineOptions(concurrency=2))
    run = tmp_path / "resumed"
    stopper = StopAfter(2)
    with pytest.raises(KeyboardInterrupt):
        evaluate(
            selection, run, FakeVideoBackends(), engine=EngineOptions(concurrency=2),
            progress=stopper, loading_bars=False,
        )  # fmt: skip
    with ResultStore.create_or_resume(run, _settings(whole), VideoSampleResult.from_json) as s:
        assert s.count() == 2  # exactly what was committed before the stop
        first = s.finished_ids()
    again = StopAfter(99)
    done = evaluate(selection, run, FakeVideoBackends(), progress=again, loading_bars=False)
    assert sorted(again.previous) == sorted(first)
    assert (done.run.skipped, done.run.ran) == (2, 4)
    assert stored(run) == stored(whole)
    assert metrics(run) == metrics(whole)


def _settings(run: Path) -> dict[str, Any]:
    with reading(run, VideoSampleResult.from_json) as store:
        config = store.config()
    assert config is not None
    return config


def test_shards_split_by_video_and_merge_to_the_whole_run(tmp_path: Path) -> None:
    root = write_revos_videos(tmp_path / "data")
    whole = tmp_path / "whole"
    evaluate(VideoEvalSet("revos", root), whole, FakeVideoBackends())
    samples = load_video_samples("revos", root, "valid")
    shards = [select_shard(samples, i, 2) for i in range(2)]
    assert all(shards), "the test's videos must fall in both shards"
    for shard in shards:  # every expression of a video in one shard
        assert not {s.video for s in shard} & {s.video for s in samples if s not in shard}
    for i in range(2):
        evaluate(VideoEvalSet("revos", root, shard=(i, 2)), tmp_path / f"s{i}", FakeVideoBackends())
    merged = report_runs([tmp_path / "s0", tmp_path / "s1"], tmp_path / "merged")
    assert len(merged.methods) == 1
    assert metrics(tmp_path / "merged") == metrics(whole)
    assert merged.comparisons[0].coverage.text == "12/12 (100%)"
    assert merged.partial_warning is None


def test_limit_is_partial_coverage_beside_the_published_figure(tmp_path: Path) -> None:
    root = write_revos_videos(tmp_path / "data", ("r1", "r2"))
    done = evaluate(VideoEvalSet("revos", root, limit=2), tmp_path / "run", FakeVideoBackends())
    (beside,) = done.report.comparisons
    assert beside.coverage.text == "2/6 (33%)"
    assert done.report.partial_warning == (
        "compared with published figures of whole splits on part of the split: "
        "scripted + SAM 3 video agent valid 2/6 (33%)"
    )
    doc = json.loads(done.report.metrics_json.read_text())
    assert doc["methods"][0]["coverage"]["valid"]["text"] == "2/6 (33%)"
    assert "**Warning:** compared with published figures" in done.report.report_md.read_text()


@pytest.mark.parametrize(
    ("make", "dataset", "split", "server"),
    [
        (make_mevis, "mevis", "valid", "codalab.lisn.upsaclay.fr"),
        (make_ref_youtube_vos, "ref-youtube-vos", None, "competitions.codalab.org"),
    ],
)
def test_a_split_without_public_ground_truth_is_refused_before_anything_loads(
    tmp_path: Path, make: Any, dataset: str, split: str | None, server: str
) -> None:
    root = make(tmp_path / "data")
    backends = FakeVideoBackends()
    with pytest.raises(UserError, match=server) as refused:
        evaluate(VideoEvalSet(dataset, root, split), tmp_path / "run", backends)
    assert "\n" not in str(refused.value)
    scorable = "valid_u or train" if dataset == "mevis" else "train"
    assert str(refused.value).endswith(f"(`split={scorable}` can be)")
    assert backends.built == []
    assert not (tmp_path / "run").exists()


def test_bad_selections_are_one_line_user_errors(tmp_path: Path) -> None:
    root = make_revos(tmp_path / "data")
    with pytest.raises(UserError, match="no split 'val'"):
        VideoEvalSet("revos", root, "val")
    with pytest.raises(UserError, match="unknown video dataset"):
        VideoEvalSet("reasonseg", root)
    with pytest.raises(UserError, match="`shard`"):
        VideoEvalSet("revos", root, shard=(2, 2))
    with pytest.raises(UserError, match="VideoEvalSet"):
        EvalSet("revos", root, "valid").load()
    with pytest.raises(UserError, match="`mode='sam3-only'` applies to image datasets"):
        evaluate(
            VideoEvalSet("revos", root), tmp_path / "run", FakeVideoBackends(), mode="sam3-only"
        )


def test_other_video_options_are_refused_on_resume(tmp_path: Path) -> None:
    root = make_revos(tmp_path / "data")
    run = tmp_path / "run"
    evaluate(VideoEvalSet("revos", root, limit=1), run, FakeVideoBackends())
    with pytest.raises(UserError, match="frames_shown"):
        evaluate(
            VideoEvalSet("revos", root, limit=1), run, FakeVideoBackends(),
            video_options=VideoOptions(frames_shown=3),
        )  # fmt: skip


# --------------------------------------------------------------------------- scoring


class EventsGroundTruth:
    """Ground truth of object 1 on every frame, noting when each frame is decoded."""

    def __init__(self, events: list[str], annotated: set[int]) -> None:
        self.events = events
        self.annotated = annotated

    def frames(self, names: Any, first_frame: Any, sample: Any) -> Iterator[GroundTruth | None]:
        for k in range(FRAMES):
            self.events.append(f"gt {k}")
            yield GroundTruth(mask=object_mask(1, k)) if k in self.annotated else None


def _sample(tmp_path: Path, source: Any, names: Sequence[str] | None = None) -> VideoSample:
    root = make_revos(tmp_path / "data")
    (sample, *_) = load_video_samples("revos", root, "valid")
    sample = replace(sample, gt_source=source)
    return replace(sample, frame_names=tuple(names)) if names else sample


def _tracks(events: list[str]) -> Any:
    builder = TrackBuilder(FRAMES, (H, W))
    for k in range(FRAMES):
        builder.add(k, [1], object_mask(1, k)[None], [0.9])
    tracks = builder.build()

    class Spy:
        size = tracks.size

        def union_mask(self, position: int) -> np.ndarray:
            events.append(f"pred {position}")
            return tracks.union_mask(position)

    return Spy()


def test_scoring_streams_one_frame_at_a_time_and_skips_unannotated_frames(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    sample = _sample(tmp_path, EventsGroundTruth(events, annotated={0, 2, 3}))
    positions = {f"{k:05d}": k for k in range(FRAMES)}
    prediction = Prediction(
        outcome={"status": "masks"}, tracks=_tracks(events), positions=positions
    )
    score = score_prediction(sample, prediction)
    assert (score.j, score.f, score.frames) == (1.0, 1.0, 3)
    # Each frame's prediction is decoded right after its ground truth, never ahead, and
    # never for a frame without ground truth.
    assert events == ["gt 0", "pred 0", "gt 1", "gt 2", "pred 2", "gt 3", "pred 3"]


def test_no_prediction_scores_an_empty_mask_on_every_annotated_frame(tmp_path: Path) -> None:
    sample = _sample(tmp_path, EventsGroundTruth([], annotated={0, 1, 2, 3}))
    score = score_prediction(sample, Prediction(outcome={"status": "no_mask"}))
    assert (score.j, score.f, score.frames) == (0.0, 0.0, FRAMES)


def test_a_listed_frame_the_folder_lacks_or_another_size_is_a_dataset_error(
    tmp_path: Path,
) -> None:
    sample = _sample(tmp_path, EventsGroundTruth([], annotated={0, 1, 2, 3}))
    positions = {f"{k:05d}": k for k in range(FRAMES - 1)}
    prediction = Prediction(outcome={"status": "masks"}, tracks=_tracks([]), positions=positions)
    with pytest.raises(DatasetError, match=r"00003\.jpg is listed but not in"):
        score_prediction(sample, prediction)

    class Small:
        size = (H // 2, W)

    small = Prediction(outcome={"status": "masks"}, tracks=Small(), positions=positions)  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match=f"is {H // 2}x{W} pixels but its ground truth is"):
        score_prediction(sample, small)


def test_a_sample_without_any_annotated_frame_is_a_dataset_error(tmp_path: Path) -> None:
    sample = _sample(tmp_path, EventsGroundTruth([], annotated=set()))
    with pytest.raises(DatasetError, match="no frame has ground truth"):
        score_prediction(sample, Prediction(outcome={"status": "no_mask"}))
