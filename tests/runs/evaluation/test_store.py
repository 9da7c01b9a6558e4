"""The run directory's results store."""

from __future__ import annotations

from pathlib import Path

import pytest

from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.store import ResultStore, job_dir_name, reading
from sam3_agent.values.errors import UserError

CONFIG = {"dataset": "reasonseg", "split": "val", "mode": "agent", "model": "m", "shard": None}


def _result(sid: str, *, status: str = "masks", infra: bool = False) -> SampleResult:
    return SampleResult(
        id=sid,
        split="val",
        tags=("short",),
        no_target=False,
        image_path="/x.jpg",
        query="q",
        status=status,
        intersection=1,
        union=4,
        pred_area=1,
        gt_area=4,
        failure="ChatModelError: down" if infra else None,
        infra_error=infra,
        prediction={"size": [2, 2], "counts": "04"},
    )


@pytest.mark.parametrize(
    "sample_id", ["val/a#0", "../../etc/passwd", "a" * 500, "..", "", "val/\u00e9t\u00e9 ?*:"]
)
def test_job_dir_name_is_safe(sample_id: str) -> None:
    name = job_dir_name(sample_id)
    assert "/" not in name and "\\" not in name
    assert not name.startswith(".")
    assert len(name) <= 80 + 11
    assert name == job_dir_name(sample_id)  # stable


def test_job_dir_names_do_not_collide_on_unsafe_characters() -> None:
    names = {job_dir_name(i) for i in ("val/a:b", "val/a/b", "val/a?b", "val_a_b")}
    assert len(names) == 4


def test_commit_and_read_back(tmp_path: Path) -> None:
    with ResultStore.create_or_resume(tmp_path / "run", CONFIG, SampleResult.from_json) as store:
        store.commit(_result("b"))
        store.commit(_result("a", status="failed", infra=True))
        store.set_planned(7)
    with reading(tmp_path / "run", SampleResult.from_json) as store:
        results = store.results()
        assert [r.id for r in results] == ["a", "b"]
        assert results[0].failed and results[0].infra_error
        assert results[1] == _result("b")
        assert store.finished_ids() == {"a", "b"}
        assert store.finished_ids(include_infra_errors=False) == {"b"}
        assert store.planned() == 7
        assert store.config() == CONFIG


def test_same_id_is_stored_once(tmp_path: Path) -> None:
    with ResultStore.create_or_resume(tmp_path, CONFIG, SampleResult.from_json) as store:
        store.commit(_result("a", status="failed", infra=True))
        store.commit(_result("a"))
        assert store.count() == 1
        assert store.results()[0].status == "masks"


def test_commit_is_visible_to_another_connection_at_once(tmp_path: Path) -> None:
    writer = ResultStore.create_or_resume(tmp_path, CONFIG, SampleResult.from_json)
    writer.commit(_result("a"))
    with reading(tmp_path, SampleResult.from_json) as reader:
        assert reader.finished_ids() == {"a"}
    writer.close()


def test_resume_with_other_settings_is_refused(tmp_path: Path) -> None:
    ResultStore.create_or_resume(tmp_path, CONFIG, SampleResult.from_json).close()
    with pytest.raises(UserError) as info:
        ResultStore.create_or_resume(
            tmp_path, {**CONFIG, "split": "test", "model": "other"}, SampleResult.from_json
        )
    message = str(info.value)
    assert "different settings" in message
    assert "model was 'm', now 'other'; split was 'val', now 'test'" in message
    ResultStore.create_or_resume(
        tmp_path, dict(CONFIG), SampleResult.from_json
    ).close()  # same settings: fine


@pytest.mark.parametrize(
    ("now", "named"),
    [
        ({"agent": {"max_rounds": 3}}, "agent.max_rounds was 5, now 3"),
        ({"agent": {"prompts": {"sha256": "b"}}}, "agent.prompts.sha256 was 'a', now 'b'"),
        ({"generation": {"temperature": 0.7}}, "generation.temperature was not given, now 0.7"),
        (
            {"agent": None},
            "agent.max_rounds was 5, now not given; agent.prompts.sha256 was 'a', now not given",
        ),
        ({"agent": 1}, 'agent was {"max_rounds": 5, "prompts": {"sha256": "a"}}, now 1'),
    ],
)
def test_a_refusal_names_each_setting_inside_a_group(
    tmp_path: Path, now: dict[str, object], named: str
) -> None:
    nested = {**CONFIG, "agent": {"max_rounds": 5, "prompts": {"sha256": "a"}}}
    ResultStore.create_or_resume(tmp_path, nested, SampleResult.from_json).close()
    changed = {**nested, **now}
    if isinstance(now.get("agent"), dict):
        changed["agent"] = {**nested["agent"], **now["agent"]}  # type: ignore[dict-item]
    with pytest.raises(UserError) as info:
        ResultStore.create_or_resume(tmp_path, changed, SampleResult.from_json)
    assert str(info.value) == (
        f"{tmp_path} holds a run made with different settings ({named}); use the same "
        "settings to resume, or another --out directory"
    )


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a run directory"):
        reading(tmp_path, SampleResult.from_json)


def test_meta_is_recorded_beside_the_plan_and_read_back(tmp_path: Path) -> None:
    with ResultStore.create_or_resume(tmp_path / "run", CONFIG, SampleResult.from_json) as store:
        assert store.meta("population") is None
        store.set_meta("population", {"samples": 200, "tags": {}})
        store.set_meta("population", {"samples": 779, "tags": {"long": 600}})  # latest wins
        with pytest.raises(ValueError, match="results store itself"):
            store.set_meta("planned", 3)  # the store's own key
    with reading(tmp_path / "run", SampleResult.from_json) as store:
        assert store.meta("population") == {"samples": 779, "tags": {"long": 600}}
        assert store.config() == CONFIG
        store._db.execute("UPDATE meta SET value = 'not json' WHERE key = 'population'")
        assert store.meta("population") is None  # unreadable: unknown, not a crash


def test_image_and_video_records_share_one_tags_round_trip() -> None:
    """Both records store tags as a JSON list and read them back as a tuple (EvalRecord)."""
    from sam3_agent.runs.evaluation.results import EvalRecord, VideoSampleResult

    assert issubclass(SampleResult, EvalRecord)
    assert issubclass(VideoSampleResult, EvalRecord)
    record = VideoSampleResult(
        id="v1",
        query="q",
        image_path="frames",
        split="valid",
        tags=("a", "b"),
        no_target=False,
        j=0.5,
        f=0.25,
        frames_scored=3,
        status="masks",
    )
    doc = record.to_json()
    assert doc["tags"] == ["a", "b"]
    assert VideoSampleResult.from_json(doc) == record
