"""``run_batch()`` and ``evaluate()`` as library calls: no CLI, fake backends, any engine.

What the ``batch`` and ``eval`` commands promise holds for the library calls they wrap:
the run directory's files, resume (a second call skips what is stored), refusal of other
settings, progress through a listener, and the sam3-only mode without an MLLM.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sam3_agent.agent.sam3_only import segment_only
from sam3_agent.runs.batch.requests import BatchRequest
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.batch.run import run_batch
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.evaluation.run import EvalSet, evaluate
from sam3_agent.runs.jobs.base import EngineOptions, JobResult
from sam3_agent.runs.jobs.store import reading
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import UserError
from sam3_agent.values.images import ImageTooLargeError
from tests.support.eval_fixtures import EXPECTED, make_chat_model, make_segmenter, write_reasonseg
from tests.support.fakes import FakeSegmenter, ScriptedChatModel


@dataclass(frozen=True)
class FakeModels:
    """A :class:`~sam3_agent.runs.jobs.models.ModelSource` building the tests' fakes."""

    sam3: str = "fake-sam3"
    sam3_url: str | None = None
    llm: str | None = None
    llm_model: str | None = "scripted"
    temperature: float | None = None
    built: list[str] = field(default_factory=list, compare=False)

    def generation_identity(self) -> dict[str, Any]:
        return {} if self.temperature is None else {"temperature": self.temperature}

    def require_model_name(self, engine: str) -> str | None:
        # As BackendSpec does: the name given, and the Ray engine refused without one.
        if self.llm_model is None and engine == "ray":
            raise UserError("`engine='ray'` loads the MLLM on the workers only: name it")
        return self.llm_model

    def build_segmenter(self) -> FakeSegmenter:
        self.built.append("sam3")
        return make_segmenter()

    def build_chat_model(self) -> ScriptedChatModel:
        self.built.append("mllm")
        return make_chat_model()


class Recorder:
    """A progress listener keeping what it was told."""

    def __init__(self) -> None:
        self.total = 0
        self.previous: list[str] = []
        self.seen: list[str] = []

    def start(self, total: int, already_done: Sequence[JobResult]) -> None:
        self.total = total
        self.previous = [r.id for r in already_done]

    def update(self, result: JobResult) -> None:
        self.seen.append(result.id)


def _requests(tmp_path: Path) -> list[BatchRequest]:
    root = write_reasonseg(tmp_path / "rs")
    images = sorted((root / "val").glob("*.jpg"))
    queries = ("the left block", "the missing thing", "the query that breaks the endpoint")
    return [
        BatchRequest(f"{image.name}:{query}", image, query)
        for image in images[:2]
        for query in queries
    ]


def test_run_batch_writes_the_run_directory_and_resumes(tmp_path: Path) -> None:
    requests = _requests(tmp_path)
    out = tmp_path / "out"
    models = FakeModels()
    progress = Recorder()
    done = run_batch(requests, out, models, config=AgentConfig(), progress=progress)
    assert (done.run.total, done.run.ran, done.run.skipped) == (6, 6, 0)
    assert done.run.failed == 2  # the endpoint's failures are records, not a stopped run
    assert done.totals.by_status == {"masks": 2, "no_mask": 2, "failed": 2}
    rows = [json.loads(line) for line in done.summary.read_text().splitlines()]
    assert [r["id"] for r in rows] == [r.id for r in requests]  # input order
    for row in rows:
        if row["status"] == "masks":
            assert row["masks"] == 1 and row["mask_pixels"] == 100
            assert (out / row["outputs"] / "result.json").is_file()
    assert progress.total == 6 and sorted(progress.seen) == sorted(r.id for r in requests)
    with reading(out, RequestResult.from_json) as store:
        records = store.results()
        assert all(isinstance(r, RequestResult) for r in records)
        assert store.config() == {
            "command": "batch",
            "model": "scripted",
            "sam3": "fake-sam3",
            "agent": store.config()["agent"],  # type: ignore[index]
        }

    again = Recorder()
    resumed = run_batch(requests, out, models, progress=again, retry_failed=False)
    assert (resumed.run.ran, resumed.run.skipped) == (0, 6)
    assert sorted(again.previous) == sorted(r.id for r in requests)
    assert resumed.totals == done.totals


def test_a_missing_image_fails_its_request_alone_also_on_resume(tmp_path: Path) -> None:
    """One request's image missing (from the start, or deleted before a resume) fails that
    request with a one-line reason; the others run."""
    requests = _requests(tmp_path)
    second = sorted({r.image_path for r in requests})[1]
    gone = BatchRequest("gone.jpg:x", tmp_path / "gone.jpg", "x")
    out = tmp_path / "out"
    done = run_batch([*requests[:3], gone], out, FakeModels())
    assert (done.run.ran, done.totals.by_status["masks"]) == (4, 1)
    with reading(out, RequestResult.from_json) as store:
        record = {r.id: r for r in store.results()}["gone.jpg:x"]
    assert record.status == "failed" and record.infra_error
    assert record.failure == f"ImageLoadError: image not found: {tmp_path / 'gone.jpg'}"

    second.unlink()  # deleted between the run and its resume
    resumed = run_batch(requests, out, FakeModels())
    assert (resumed.run.skipped, resumed.run.ran, resumed.run.failed) == (3, 3, 3)
    with reading(out, RequestResult.from_json) as store:
        failures = {r.id: r.failure for r in store.results() if r.image_path == str(second)}
    assert set(failures) == {r.id for r in requests[3:]}
    assert all(f and "image not found" in f and "\n" not in f for f in failures.values())


@dataclass(frozen=True)
class BarWatchingModels(FakeModels):
    """Records whether Hugging Face's progress bars were on while the models loaded."""

    bars: list[bool] = field(default_factory=list, compare=False)

    def build_segmenter(self) -> FakeSegmenter:
        from huggingface_hub.utils import are_progress_bars_disabled
        from transformers.utils import logging as transformers_logging

        self.bars.append(
            not are_progress_bars_disabled() and transformers_logging.is_progress_bar_enabled()
        )
        return super().build_segmenter()


@pytest.mark.parametrize("kind", ["batch", "eval"])
def test_loading_bars_show_only_with_progress_and_are_put_back(tmp_path: Path, kind: str) -> None:
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as transformers_logging

    def call(models: FakeModels, out: Path, progress: Recorder | None) -> Any:
        if kind == "batch":
            return run_batch(_requests(tmp_path)[:1], out, models, progress=progress)
        dataset = EvalSet("reasonseg", write_reasonseg(tmp_path / "rs"), limit=1)
        return evaluate(dataset, out, models, progress=progress)

    models = BarWatchingModels()
    done = call(models, tmp_path / "quiet", None)
    call(models, tmp_path / "shown", Recorder())
    assert models.bars == [False, True]
    assert not are_progress_bars_disabled() and transformers_logging.is_progress_bar_enabled()
    assert done.run.ran == 1 and done.run.wall_s > 0
    if kind == "batch":
        assert done.wall_s == done.run.wall_s
        assert done.requests_per_s == pytest.approx(1 / done.wall_s)


def test_run_batch_refuses_other_settings_before_building_a_model(tmp_path: Path) -> None:
    requests = _requests(tmp_path)[:1]
    out = tmp_path / "out"
    run_batch(requests, out, FakeModels())
    other = FakeModels(temperature=0.7)
    with pytest.raises(UserError, match="different settings"):
        run_batch(requests, out, other)
    assert other.built == []  # refused before any model loaded


def test_run_batch_checks_the_engine_options_first(tmp_path: Path) -> None:
    models = FakeModels()
    with pytest.raises(UserError, match="`workers` applies to `engine='ray'`"):
        run_batch(_requests(tmp_path), tmp_path / "out", models, engine=EngineOptions(workers=2))
    unnamed = FakeModels(llm_model=None)
    with pytest.raises(UserError, match="`engine='ray'` loads the MLLM"):
        run_batch([], tmp_path / "out", unnamed, engine=EngineOptions(engine="ray"))
    assert models.built == unnamed.built == [] and not (tmp_path / "out").exists()


def test_evaluate_scores_writes_the_report_and_resumes(tmp_path: Path) -> None:
    dataset = EvalSet("reasonseg", write_reasonseg(tmp_path / "rs"))
    out = tmp_path / "run"
    done = evaluate(dataset, out, FakeModels())
    assert (done.run.total, done.run.ran, done.run.failed) == (4, 4, 1)
    overall = done.report.methods[0].metrics.overall
    assert overall.giou == pytest.approx(EXPECTED["reasonseg"]["gIoU"])
    assert overall.ciou == pytest.approx(EXPECTED["reasonseg"]["cIoU"])
    assert done.report.metrics_json.is_file() and done.report.report_md.is_file()
    with reading(out, SampleResult.from_json) as store:
        config = store.config()
    assert config is not None
    assert (config["dataset"], config["split"], config["mode"], config["model"]) == (
        "reasonseg",
        "val",
        "agent",
        "scripted",
    )
    resumed = evaluate(dataset, out, FakeModels())
    assert (resumed.run.ran, resumed.run.skipped) == (0, 4)
    with pytest.raises(UserError, match="different settings"):
        evaluate(EvalSet("reasonseg", dataset.root, all_texts=True), out, FakeModels())


def test_evaluate_records_the_split_and_the_report_says_how_much_was_scored(
    tmp_path: Path,
) -> None:
    """A --limit run beside the paper's figures: the split it took 1 of 4 samples from is
    recorded, and every comparison says so, with one warning line."""
    root = write_reasonseg(tmp_path / "rs")
    out = tmp_path / "run"
    models = FakeModels(llm_model="Qwen/Qwen2.5-VL-7B-Instruct")
    done = evaluate(EvalSet("reasonseg", root, limit=1), out, models)
    with reading(out, SampleResult.from_json) as store:
        assert store.meta("population") == {"samples": 4, "tags": {"long": 2, "short": 2}}
        assert store.planned() == 1
    (comparison,) = done.report.comparisons
    assert comparison.coverage.text == "1/4 (25%)" and comparison.coverage.partial
    assert done.report.partial_warning is not None
    assert "val 1/4 (25%)" in done.report.partial_warning
    md = done.report.report_md.read_text()
    assert "| Qwen2.5-VL 7B | val | gIoU | 20.0 | 62.2 | -42.2 | 1/4 (25%) |" in md
    assert "**Warning:** compared with published figures of whole splits on part" in md

    whole = evaluate(EvalSet("reasonseg", root), out, models)  # the rest of the split
    assert whole.report.comparisons[0].coverage.text == "4/4 (100%)"
    assert whole.report.partial_warning is None
    assert "Warning" not in whole.report.report_md.read_text()


def test_evaluate_sam3_only_builds_no_mllm(tmp_path: Path) -> None:
    dataset = EvalSet("reasonseg", write_reasonseg(tmp_path / "rs"), shard=(0, 1))
    models = FakeModels(llm_model=None)  # nothing names an MLLM: none is needed
    done = evaluate(dataset, tmp_path / "run", models, mode="sam3-only")
    assert "mllm" not in models.built
    assert done.run.ran == 4
    with reading(tmp_path / "run", SampleResult.from_json) as store:
        config = store.config()
        results = store.results()
    assert (
        config is not None
        and config["model"] is None
        and config["agent"] == {"score_threshold": 0.5}
    )
    assert {r.status for r in results} >= {"masks", "no_mask"}


def test_evaluate_sam3_only_honours_the_pixel_limit(tmp_path: Path) -> None:
    dataset = EvalSet("reasonseg", write_reasonseg(tmp_path / "rs"))
    done = evaluate(
        dataset,
        tmp_path / "run",
        FakeModels(),
        mode="sam3-only",
        config=AgentConfig(max_image_pixels=100),
    )
    assert done.run.failed == 4
    with reading(tmp_path / "run", SampleResult.from_json) as store:
        assert all("image too large" in (r.failure or "") for r in store.results())


def test_evaluate_refuses_an_unknown_mode(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="`mode`"):
        evaluate(EvalSet("reasonseg", tmp_path), tmp_path / "run", FakeModels(), mode="other")


def test_segment_only_refuses_an_image_over_the_pixel_limit() -> None:
    segmenter = FakeSegmenter()
    with pytest.raises(ImageTooLargeError):
        segment_only(
            segmenter,
            np.zeros((20, 20, 3), np.uint8),
            "q",
            config=AgentConfig(max_image_pixels=100),
        )
    assert segmenter.embed_calls == 0


def test_a_batch_record_stored_as_an_evaluation_sample_still_reads() -> None:
    """Batch directories made before requests had their own record type resume."""
    old = {
        "id": "a.png:cat", "split": "batch", "tags": [], "no_target": False,
        "image_path": "/x/a.png", "query": "cat", "status": "masks", "intersection": 0,
        "union": 0, "pred_area": 120, "gt_area": 0, "rounds": 2, "prompt_tokens": 10,
        "completion_tokens": 3, "calls": 2, "time_s": 1.5, "failure": None,
        "infra_error": False, "prediction": None, "ground_truth": None, "ignore": None,
        "artifacts": "a.png_cat", "extra": {"masks": 1, "scores": [0.9]},
    }  # fmt: skip
    record = RequestResult.from_json(old)
    assert (record.masks, record.mask_pixels, record.extra) == (1, 120, {"scores": [0.9]})
    assert RequestResult.from_json(record.to_json()) == record


@pytest.mark.parametrize("kind", ["batch", "eval"])
def test_a_worker_factory_travels_without_the_drivers_chat_model(kind: str) -> None:
    from sam3_agent.runs.batch.workers import BatchWorkerFactory
    from sam3_agent.runs.evaluation.handler import EvalWorkerFactory

    chat = make_chat_model()
    factory: Any = (
        BatchWorkerFactory(FakeModels(), AgentConfig(), chat_model=chat)
        if kind == "batch"
        else EvalWorkerFactory(FakeModels(), AgentConfig(), False, chat_model=chat)
    )
    travelled = pickle.loads(pickle.dumps(factory))
    assert factory.chat_model is chat and travelled.chat_model is None
    assert travelled == factory  # the settings travel whole
