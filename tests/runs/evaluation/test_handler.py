"""The evaluation runner with a SAM 3-style predictor over the fake segmenter.

The agent itself is exercised end to end in ``tests/apps/cli/test_evaluate.py``; here a small
predictor (segment the raw query, union of all masks) isolates the runner: ordering,
sharing, failures, commits and resume.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sam3_agent.runs.evaluation.datasets import Sample, load_samples
from sam3_agent.runs.evaluation.handler import evaluate_samples
from sam3_agent.runs.evaluation.metrics import breakdown
from sam3_agent.runs.evaluation.report import report_runs
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.evaluation.selection import parse_shard, select_shard, shard_of
from sam3_agent.runs.jobs.embeddings import SharedEmbeddings
from sam3_agent.runs.jobs.store import ResultStore
from sam3_agent.values.errors import ChatModelError, DatasetError, SegmenterError, UserError
from tests.support.eval_fixtures import (
    EXPECTED,
    PLAN,
    UnionPredictor,
    make_segmenter,
    write_grefcoco,
    write_reasonseg,
)
from tests.support.fakes import FakeSegmenter

CONFIG = {"dataset": "test", "split": "val", "mode": "sam3-only"}


class StopAfter:
    """A progress listener that fails after ``k`` commits: a crash at a chosen moment."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.seen = 0
        self.total = 0
        self.previous: list[str] = []

    def start(self, total: int, already_done: Sequence[SampleResult]) -> None:
        self.total = total
        self.previous = [r.id for r in already_done]

    def update(self, result: SampleResult) -> None:
        self.seen += 1
        if self.seen >= self.k:
            raise KeyboardInterrupt  # what Ctrl-C raises; BaseException, like a kill


def _run(
    samples: Sequence[Sample],
    run_dir: Path,
    *,
    segmenter: FakeSegmenter | None = None,
    concurrency: int = 4,
    progress: Any = None,
    retry_failed: bool = False,
    config: dict[str, Any] = CONFIG,
) -> tuple[list[SampleResult], UnionPredictor, SharedEmbeddings]:
    shared = SharedEmbeddings(segmenter or make_segmenter())
    predictor = UnionPredictor(shared)
    with ResultStore.create_or_resume(run_dir, config, SampleResult.from_json) as store:
        asyncio.run(
            evaluate_samples(
                samples,
                store,
                predictor,
                concurrency=concurrency,
                shared=shared,
                progress=progress,
                retry_failed=retry_failed,
            )
        )
        return store.results(), predictor, shared


def _comparable(results: Sequence[SampleResult]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.to_json().items() if k != "time_s"} for r in results]


@pytest.fixture
def reasonseg(tmp_path: Path) -> list[Sample]:
    return load_samples("reasonseg", write_reasonseg(tmp_path / "rs"), "val")


def test_metrics_of_a_full_run(reasonseg: list[Sample], tmp_path: Path) -> None:
    results, _, _ = _run(reasonseg, tmp_path / "run")
    b = breakdown(r.scored() for r in results)
    want = EXPECTED["reasonseg"]
    assert b.overall.count == want["count"]
    assert b.overall.giou == pytest.approx(want["gIoU"])
    assert b.overall.ciou == pytest.approx(want["cIoU"])
    assert (b.tags["short"].giou, b.tags["short"].ciou) == pytest.approx(want["short"])
    assert (b.tags["long"].giou, b.tags["long"].ciou) == pytest.approx(want["long"])
    assert b.overall.precision == pytest.approx(want["pr"])
    assert [i for i, _ in b.failed] == ["val/d#0"]


def test_infrastructure_failure_is_stored_and_the_run_goes_on(
    reasonseg: list[Sample], tmp_path: Path
) -> None:
    results, _, _ = _run(reasonseg, tmp_path / "run", concurrency=1)
    by_id = {r.id: r for r in results}
    failed = by_id["val/d#0"]
    assert failed.status == "failed" and failed.infra_error
    assert failed.failure == "SegmenterError: scripted SAM 3 failure"
    assert (failed.intersection, failed.union, failed.prediction) == (0, 100, None)
    assert by_id["val/b#0"].status == "masks"
    assert len(results) == 4


def test_each_image_is_embedded_once_and_released(tmp_path: Path) -> None:
    samples = load_samples("grefcoco", write_grefcoco(tmp_path / "g"), "val")
    segmenter = make_segmenter()
    _, predictor, shared = _run(samples, tmp_path / "run", segmenter=segmenter, concurrency=4)
    assert len({s.image_path for s in samples}) == 2
    assert segmenter.embed_calls == 2
    assert shared.held == 0
    assert len(predictor.queries) == 4


def test_samples_run_grouped_by_image(tmp_path: Path) -> None:
    samples = load_samples("grefcoco", write_grefcoco(tmp_path / "g"), "val")
    mixed = [samples[0], samples[2], samples[1], samples[3]]  # images 1, 2, 1, 2
    _, predictor, _ = _run(mixed, tmp_path / "run", concurrency=1)
    by_query = {s.query: s.image_path for s in samples}
    images = [by_query[q] for q in predictor.queries]
    assert images == sorted(images)


def test_killed_run_resumes_to_the_uninterrupted_result(
    reasonseg: list[Sample], tmp_path: Path
) -> None:
    whole, _, _ = _run(reasonseg, tmp_path / "whole")
    stopper = StopAfter(2)
    with pytest.raises(KeyboardInterrupt):
        _run(reasonseg, tmp_path / "resumed", concurrency=2, progress=stopper)
    with ResultStore.create_or_resume(
        tmp_path / "resumed", CONFIG, SampleResult.from_json
    ) as store:
        assert store.count() == 2  # exactly what was committed before the stop
        first = store.finished_ids()
    again = StopAfter(99)
    resumed, predictor, _ = _run(reasonseg, tmp_path / "resumed", progress=again)
    assert sorted(again.previous) == sorted(first)
    assert again.total == 4 and again.seen == 2
    assert not set(predictor.queries) & {s.query for s in reasonseg if s.id in first}
    assert _comparable(resumed) == _comparable(whole)


def test_cancellation_keeps_commits(reasonseg: list[Sample], tmp_path: Path) -> None:
    shared = SharedEmbeddings(make_segmenter())
    predictor = UnionPredictor(shared, delay_s=0.01)

    class CancelAfterFirst(StopAfter):
        def __init__(self, task: asyncio.Task[Any]) -> None:
            super().__init__(99)
            self.task = task

        def update(self, result: SampleResult) -> None:
            self.task.cancel()

    async def main(store: ResultStore[SampleResult]) -> None:
        task = asyncio.current_task()
        assert task is not None
        await evaluate_samples(
            reasonseg,
            store,
            predictor,
            concurrency=1,
            shared=shared,
            progress=CancelAfterFirst(task),
        )

    with ResultStore.create_or_resume(tmp_path / "run", CONFIG, SampleResult.from_json) as store:
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(main(store))
        assert store.count() == 1
    results, _, _ = _run(reasonseg, tmp_path / "run")
    assert len(results) == 4


def test_retry_failed_evaluates_infrastructure_failures_again(
    reasonseg: list[Sample], tmp_path: Path
) -> None:
    _run(reasonseg, tmp_path / "run")
    fixed = make_segmenter()
    fixed.results.pop("the query that breaks the endpoint")  # SAM 3 is back: finds nothing
    results, predictor, _ = _run(reasonseg, tmp_path / "run", segmenter=fixed)
    assert predictor.queries == []  # a plain rerun skips stored failures
    results, predictor, _ = _run(reasonseg, tmp_path / "run", segmenter=fixed, retry_failed=True)
    assert predictor.queries == ["the query that breaks the endpoint"]
    assert {r.id: r.status for r in results}["val/d#0"] == "no_mask"


def test_broken_ground_truth_stops_the_run_keeping_commits(tmp_path: Path) -> None:
    root = write_reasonseg(tmp_path / "rs")
    samples = load_samples("reasonseg", root, "val")
    (root / "val" / "c.json").write_text("{broken")
    with ResultStore.create_or_resume(tmp_path / "run", CONFIG, SampleResult.from_json) as store:
        shared = SharedEmbeddings(make_segmenter())
        with pytest.raises(DatasetError, match=r"c\.json.*val/c"):
            asyncio.run(evaluate_samples(samples, store, UnionPredictor(shared), concurrency=1))
        assert store.finished_ids() == {"val/a#0", "val/b#0"}


def test_mask_size_mismatch_is_a_dataset_error(reasonseg: list[Sample], tmp_path: Path) -> None:
    segmenter = make_segmenter()
    segmenter.results["the left block"] = PLAN["top left cat"].detections()  # a 30x50 mask
    with pytest.raises(DatasetError, match=r"val/a#0.*ground truth is 40x60"):
        _run(reasonseg, tmp_path / "run", segmenter=segmenter)


def test_shards_partition_samples_by_image(tmp_path: Path) -> None:
    samples = load_samples("grefcoco", write_grefcoco(tmp_path / "g"), "val")
    samples = samples + load_samples("reasonseg", write_reasonseg(tmp_path / "rs"), "val")
    shards = [select_shard(samples, i, 3) for i in range(3)]
    assert sorted(s.id for shard in shards for s in shard) == sorted(s.id for s in samples)
    for i, shard in enumerate(shards):
        for s in shard:
            assert shard_of(s, 3) == i
    assert select_shard(samples, 0, 1) == samples
    assert [s.id for s in select_shard(samples, 1, 3)] == [s.id for s in shards[1]]


@pytest.mark.parametrize("text", ["3", "a/b", "3/3", "-1/2", "0/0", "1/2/3"])
def test_parse_shard_rejects(text: str) -> None:
    with pytest.raises(UserError, match="`shard`"):
        parse_shard(text)


def test_parse_shard() -> None:
    assert parse_shard("2/4") == (2, 4)


def test_concurrency_must_be_positive(reasonseg: list[Sample], tmp_path: Path) -> None:
    with pytest.raises(UserError, match="`concurrency`"):
        _run(reasonseg, tmp_path / "run", concurrency=0)


def test_shared_embeddings_compute_once_per_content() -> None:
    segmenter = FakeSegmenter()
    shared = SharedEmbeddings(segmenter)
    image = np.zeros((4, 4, 3), dtype=np.uint8)
    first = shared.embed(image)
    assert shared.embed(image.copy()) is first
    shared.release("unknown")
    assert segmenter.embed_calls == 1 and shared.held == 1


async def test_sam3_only_is_the_union_of_every_mask_above_threshold() -> None:
    from sam3_agent.runs.evaluation.handler import Sam3OnlyPredictor
    from sam3_agent.values.detections import Detections
    from tests.support.fakes import FakeSegmenter, square_mask

    big = square_mask(40, 40, 0, 0, 20)
    overlapping = square_mask(40, 40, 5, 5, 20)  # would be dropped by overlap removal
    weak = square_mask(40, 40, 30, 30, 5)
    detections = Detections.from_masks(np.stack([big, overlapping, weak]), [0.9, 0.8, 0.3])
    predictor = Sam3OnlyPredictor(FakeSegmenter({"the box": detections}))
    image = np.zeros((40, 40, 3), dtype=np.uint8)
    prediction = await predictor.predict(image, "the box", Path("unused"))
    assert prediction.status == "masks" and prediction.mask is not None
    np.testing.assert_array_equal(prediction.mask, big | overlapping)
    nothing = await predictor.predict(image, "something else", Path("unused"))
    assert nothing.status == "no_mask" and nothing.mask is None


def test_grefcoco_precision_counts_target_samples_only(tmp_path: Path) -> None:
    samples = load_samples("grefcoco", write_grefcoco(tmp_path / "g"), "val")
    results, _, _ = _run(samples, tmp_path / "run", config={**CONFIG, "dataset": "grefcoco"})
    b = breakdown(r.scored() for r in results)
    # Targets: "both small squares" IoU 1.0, "the lonely square" 0.0. The no-target sample
    # answered with no mask (IoU 1.0) is no hit: ReLA's Pr@ is over target samples.
    assert b.overall.precision == {t: 0.5 for t in (0.5, 0.6, 0.7, 0.8, 0.9)}
    assert b.tags["target"].precision == b.overall.precision
    assert b.tags["no-target"].precision is None
    files = report_runs([tmp_path / "run"], tmp_path / "report")
    doc = json.loads(files.metrics_json.read_text())
    assert doc["methods"][0]["metrics"]["tags"]["no-target"]["precision"] is None
    assert "% of target samples with IoU at or above the threshold" in files.report_md.read_text()


# --------------------------------------------------------------------------- failing samples


class Unprintable(Exception):
    """An exception whose message itself raises."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


class RaisingPredictor(UnionPredictor):
    """The union predictor, except that some queries raise a chosen exception."""

    def __init__(self, segmenter: SharedEmbeddings, raises: dict[str, BaseException]) -> None:
        super().__init__(segmenter)
        self.raises = raises

    async def predict(self, image: Any, query: str, output_dir: Path) -> Any:
        error = self.raises.get(query)
        if error is not None:
            await asyncio.sleep(0)  # raise after a suspension, as a real backend would
            raise error
        return await super().predict(image, query, output_dir)


_BUILTIN_ERRORS: list[type[BaseException]] = [
    ValueError,
    TypeError,
    RuntimeError,
    KeyError,
    IndexError,
    OSError,
    ZeroDivisionError,
    RecursionError,
    MemoryError,
    AssertionError,
    NotImplementedError,
    AttributeError,
    UnicodeError,
    OverflowError,
    TimeoutError,
    ConnectionResetError,
    ChatModelError,
    SegmenterError,
    UserError,
    DatasetError,
]
_custom_errors = st.builds(
    lambda base, name: type(name, (base,), {}),
    st.sampled_from([Exception, BaseException, ValueError, OSError, ChatModelError]),
    st.from_regex(r"[A-Z][a-z]{1,8}Error", fullmatch=True),
)
_errors = st.builds(
    lambda cls, message: cls(message),
    st.one_of(st.sampled_from(_BUILTIN_ERRORS), _custom_errors, st.just(Unprintable)),
    st.text(max_size=700),
)


@given(
    plan=st.lists(st.one_of(st.none(), _errors), min_size=4, max_size=4),
    concurrency=st.integers(1, 4),
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_no_exception_of_one_sample_stops_the_run(
    reasonseg: list[Sample], plan: list[BaseException | None], concurrency: int
) -> None:
    queries = [s.query for s in reasonseg]
    raises = {q: e for q, e in zip(queries, plan, strict=True) if e is not None}
    run_dir = Path(tempfile.mkdtemp(prefix="failing-run-"))
    try:
        shared = SharedEmbeddings(make_segmenter())
        with ResultStore.create_or_resume(run_dir, CONFIG, SampleResult.from_json) as store:
            outcome = asyncio.run(
                evaluate_samples(
                    reasonseg,
                    store,
                    RaisingPredictor(shared, raises),
                    concurrency=concurrency,
                    shared=shared,
                )
            )
            results = {r.id: r for r in store.results()}
        assert outcome.ran == 4 and len(results) == 4
        for sample in reasonseg:
            result = results[sample.id]
            error = raises.get(sample.query)
            if error is None:
                continue
            assert result.status == "failed" and result.infra_error
            assert result.prediction is None and result.intersection == 0
            assert result.union == result.gt_area  # scored as an empty prediction
            failure = result.failure or ""
            assert failure.split(":")[0] == type(error).__name__
            assert "\n" not in failure and len(failure) <= 500 + len(type(error).__name__) + 2
            failure.encode("utf-8")  # storable and printable anywhere
            message = " ".join(str(error).split()) if not isinstance(error, Unprintable) else ""
            if message and message.isascii() and message.isprintable() and len(message) < 400:
                assert failure == f"{type(error).__name__}: {message}"
        b = breakdown(r.scored() for r in results.values())
        failed_ids = {i for i, _ in b.failed}
        assert {s.id for s in reasonseg if s.query in raises} <= failed_ids
        assert b.overall.count == 4
    finally:
        shutil.rmtree(run_dir)


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit, asyncio.CancelledError])
def test_an_interrupt_raised_by_a_sample_stops_the_run(
    reasonseg: list[Sample], tmp_path: Path, stop: type[BaseException]
) -> None:
    shared = SharedEmbeddings(make_segmenter())
    third = sorted(reasonseg, key=lambda s: (str(s.image_path), s.id))[2]
    predictor = RaisingPredictor(shared, {third.query: stop()})
    with ResultStore.create_or_resume(tmp_path / "run", CONFIG, SampleResult.from_json) as store:
        with pytest.raises(stop):
            asyncio.run(evaluate_samples(reasonseg, store, predictor, concurrency=1, shared=shared))
        assert store.count() == 2  # what finished before the stop is kept


class _Blank:
    """An image source whose every image is a 4x4 black one."""

    async def get(self, path: Path, **_: Any) -> np.ndarray:
        return np.zeros((4, 4, 3), dtype=np.uint8)


outcomes = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["masks", "no_mask"]),
        "rounds": st.integers(0, 50),
        "prompt_tokens": st.integers(0, 10**6),
        "completion_tokens": st.integers(0, 10**6),
        "calls": st.integers(0, 100),
        "failure": st.none() | st.text(max_size=20),
    }
)


@given(outcome=outcomes)
def test_the_predictors_outcome_reaches_the_record_field_by_field(outcome: dict[str, Any]) -> None:
    """A prediction carries the record's outcome fields as one value (not a second copy of
    the record's field list), and every one of them is stored as the predictor gave it."""
    from sam3_agent.runs.evaluation.handler import EvalHandler, Prediction
    from sam3_agent.runs.evaluation.samples import GroundTruth
    from sam3_agent.runs.jobs.records import OUTCOME_FIELDS

    class Answer:
        async def predict(self, image: Any, query: str, output_dir: Path) -> Prediction:
            return Prediction(outcome=outcome)

    class Empty:
        def load(self) -> GroundTruth:
            return GroundTruth(mask=np.zeros((4, 4), dtype=bool))

    sample = Sample("val/x#0", Path("x.jpg"), "the x", "val", gt_source=Empty())
    handler = EvalHandler(Answer(), Path("unused"))
    result = asyncio.run(handler.run(sample, _Blank()))  # type: ignore[arg-type]
    assert {name: getattr(result, name) for name in OUTCOME_FIELDS} == outcome
    assert not result.infra_error and result.union == 0
