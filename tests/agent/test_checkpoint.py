"""The committed session state: JSON round trips, the journal, and refused resumes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pycocotools import mask as mask_utils

from sam3_agent.agent.checkpoint import (
    JOURNAL_FILE,
    STATE_FILE,
    Checkpoint,
    Ending,
    Fingerprint,
    Journal,
    SessionState,
    load_saved,
    read_journal,
)
from sam3_agent.agent.checkpoint.journal import JournaledSegmenter
from sam3_agent.agent.checkpoint.state import detections_to_json
from sam3_agent.agent.checkpoint.store import DirectoryLock
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.parsing import ToolCall
from sam3_agent.agent.result import Usage
from sam3_agent.agent.steps import ActionStep, Final, Observation
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import ChatModelError, ResumeError, UserError
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart, TokenUsage, request_key
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

H, W = 6, 7
_rng = np.random.default_rng(1)
IMAGES = [
    EncodedImage.encode((_rng.random((5, 4, 3)) * 255).astype(np.uint8), f"r{i:03d}_masks")
    for i in range(3)
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
observations = st.builds(
    Observation,
    text=st.text(),
    image=st.none() | st.sampled_from(IMAGES),
    image_dropped_text=st.text(max_size=20),
    image_gone_text=st.text(max_size=20),
)
steps = st.builds(
    ActionStep,
    round=st.integers(1, 500),
    reply=st.text(),
    kind=st.sampled_from(["segment", "examine", "correction"]),
    observation=observations,
    call=st.none()
    | st.builds(
        ToolCall, st.text(max_size=30), st.dictionaries(st.text(), json_values, max_size=3)
    ),
    phrase=st.none() | st.text(max_size=30),
)


@st.composite
def detections(draw: st.DrawFn) -> Detections:
    n = draw(st.integers(0, 4))
    masks = draw(arrays(np.bool_, (n, H, W)))
    scores = draw(arrays(np.float32, (n,), elements=st.floats(0, 1, width=32)))
    return Detections.from_masks(masks, scores)


token_usages = st.builds(
    TokenUsage, st.integers(0, 10**7), st.integers(0, 10**6), st.integers(0, 99)
)
endings = st.none() | st.builds(
    Ending,
    final=st.none() | st.builds(Final, st.sampled_from(["masks", "no_mask"]), detections()),
    failure=st.none() | st.text(),
)
states = st.builds(
    SessionState,
    round=st.integers(0, 500),
    corrections=st.integers(0, 50),
    steps=st.lists(steps, max_size=12),
    phrases=st.lists(st.text(max_size=40), max_size=6),
    current=st.none() | detections(),
    checks_used=st.integers(0, 200),
    usage=st.builds(
        Usage,
        main=token_usages,
        checks=token_usages,
        digests=token_usages,
        cached_calls=st.integers(0, 50),
        estimated=st.fixed_dictionaries(
            {
                part: st.fixed_dictionaries(
                    {"text": st.integers(0, 10**6), "image": st.integers(0, 10**6)}
                )
                for part in ("main", "checks", "digests")
            }
        ),
        estimate_source=st.sampled_from(["estimate", "tokenizer:Qwen/Qwen2.5-VL-7B-Instruct"]),
    ),
    timings=st.dictionaries(st.text(max_size=10), st.floats(0, 1e6)),
    ending=endings,
)


def assert_same_detections(a: Detections | None, b: Detections | None) -> None:
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert np.array_equal(a.masks, b.masks)
        assert np.array_equal(a.boxes, b.boxes)
        assert np.array_equal(a.scores, b.scores)


@settings(max_examples=60, deadline=None)
@given(state=states)
def test_state_round_trips_through_json_and_image_files(state: SessionState) -> None:
    files: dict[str, bytes] = {}

    def save(image: EncodedImage) -> str:
        files[f"images/{image.name}"] = image.data
        return f"images/{image.name}"

    def load(doc: dict[str, Any]) -> EncodedImage:
        data = files[doc["file"]]
        return EncodedImage(doc["name"], data, doc["mime"], doc["width"], doc["height"])

    text = json.dumps(state.to_json(save), ensure_ascii=False)
    back = SessionState.from_json(json.loads(text), load_image=load, image_size=(H, W))
    assert back.steps == state.steps
    assert (back.round, back.corrections, back.checks_used) == (
        state.round,
        state.corrections,
        state.checks_used,
    )
    assert back.phrases == state.phrases and back.timings == state.timings
    assert back.usage.to_dict() == state.usage.to_dict()
    assert_same_detections(back.current, state.current)
    assert (back.ending is None) == (state.ending is None)
    if back.ending is not None and state.ending is not None:
        assert back.ending.failure == state.ending.failure
        assert (back.ending.final is None) == (state.ending.final is None)
        if back.ending.final is not None and state.ending.final is not None:
            assert back.ending.final.status == state.ending.final.status
            assert_same_detections(back.ending.final.detections, state.ending.final.detections)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(entries=st.lists(st.tuples(st.sampled_from(["chat", "segment"]), st.text(), json_values)))
def test_journal_replays_entries_of_its_round_once_each(
    tmp_path: Path, entries: list[tuple[str, str, Any]]
) -> None:
    path = tmp_path / JOURNAL_FILE
    path.unlink(missing_ok=True)
    writer = Journal(path, 4, [])
    for kind, key, value in entries:
        writer.append(kind, key, value)  # type: ignore[arg-type]
    with open(path, "a") as f:
        f.write('{"round": 4, "kind": "chat", "ke')  # torn by a kill mid-write
    reader = Journal(path, 4, read_journal(path))
    assert Journal(path, 5, read_journal(path)).replayable == 0  # another round's entries
    for kind, key, value in entries:
        assert reader.take(kind, key) == _jsonable(value)  # type: ignore[arg-type]
    assert reader.replayable == 0


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_request_key_tells_images_apart_by_content() -> None:
    a = ChatMessage("user", (ImagePart(IMAGES[0]), TextPart("q")))
    b = ChatMessage("user", (ImagePart(IMAGES[1]), TextPart("q")))
    assert request_key([a], None) != request_key([b], None)
    assert request_key([a], None) == request_key([ChatMessage(a.role, a.parts)], None)


async def test_the_journal_keys_a_request_as_the_response_cache_does(tmp_path: Path) -> None:
    from sam3_agent.agent.checkpoint.journal import JournaledChatModel
    from sam3_agent.backends.response_cache import CachedChatModel

    messages = [ChatMessage("user", (ImagePart(IMAGES[0]), TextPart("q")))]
    inner = ScriptedChatModel(replies=["<tool>{}</tool>"])
    journal = Journal(tmp_path / JOURNAL_FILE, 0, [])
    await JournaledChatModel(inner, journal).complete(messages)
    [entry] = read_journal(tmp_path / JOURNAL_FILE)
    assert entry["key"] == CachedChatModel(inner, tmp_path / "c.sqlite").key(messages, None)


# -- whole sessions -----------------------------------------------------------------------


def _agent(three_cats: Detections, replies: list[str], **config: Any) -> Sam3Agent:
    chat = ScriptedChatModel(replies=list(replies))
    return Sam3Agent(FakeSegmenter({"cat": three_cats}), chat, AgentConfig(**config))


REPLIES = [
    tool("segment_phrase", text_prompt="cat"),
    tool("select_masks_and_return", final_answer_masks=[1]),
]


def test_each_round_is_committed(tmp_path: Path, image: np.ndarray, three_cats: Detections) -> None:
    _agent(three_cats, REPLIES).run(image, "a cat", output_dir=tmp_path)
    saved = json.loads((tmp_path / STATE_FILE).read_text())
    state = saved["state"]
    assert state["round"] == 2 and state["phrases"] == ["cat"]
    assert state["ending"]["final"]["status"] == "masks"
    assert len(state["current"]["rle"]) == 3
    assert state["steps"][0]["observation"]["image"]["file"] == "images/r001_masks.jpg"
    assert saved["trace_bytes"] == (tmp_path / "trace.jsonl").stat().st_size
    assert (tmp_path / JOURNAL_FILE).read_text() == ""  # the finished round's calls are gone


def test_resume_of_a_finished_session_makes_no_call(
    tmp_path: Path, image: np.ndarray, three_cats: Detections
) -> None:
    first = _agent(three_cats, REPLIES).run(image, "a cat", output_dir=tmp_path)
    again_agent = _agent(three_cats, [])
    again = again_agent.run(image, "a cat", output_dir=tmp_path, resume=True)
    assert again_agent.chat_model.calls == []  # type: ignore[attr-defined]
    assert again.to_json() | {"timings_s": None} == first.to_json() | {"timings_s": None}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"query": "a dog"}, "the query differs ('a cat' at start, 'a dog' now)"),
        ({"flip": True}, "the image differs"),
        ({"max_rounds": 7}, "setting max_rounds differs (1 at start, 7 now)"),
        (
            {"model": "another-vlm"},
            "setting model differs ('scripted' at start, 'another-vlm' now)",
        ),
    ],
)
def test_a_different_request_is_refused_naming_the_difference(
    tmp_path: Path,
    image: np.ndarray,
    three_cats: Detections,
    change: dict[str, Any],
    named: str,
) -> None:
    _agent(three_cats, REPLIES[:1], max_rounds=1).run(image, "a cat", output_dir=tmp_path)
    before = (tmp_path / "trace.jsonl").read_bytes()
    query = change.get("query", "a cat")
    pixels = image[::-1].copy() if change.get("flip") else image
    agent = _agent(three_cats, REPLIES[1:], max_rounds=change.get("max_rounds", 1))
    agent.chat_model.name = change.get("model", "scripted")  # type: ignore[misc]
    with pytest.raises(ResumeError, match=re.escape(named)):
        agent.run(pixels, query, output_dir=tmp_path, resume=True)
    assert (tmp_path / "trace.jsonl").read_bytes() == before  # nothing touched


def test_resume_needs_a_saved_session(
    tmp_path: Path, image: np.ndarray, three_cats: Detections
) -> None:
    with pytest.raises(ResumeError, match="nothing to resume"):
        _agent(three_cats, REPLIES).run(image, "a cat", output_dir=tmp_path, resume=True)


def endpoint_down(messages: object) -> str:
    raise ChatModelError("endpoint down")


def test_a_resumed_session_keeps_the_prompts_it_started_with(
    tmp_path: Path, image: np.ndarray, three_cats: Detections
) -> None:
    first = Sam3Agent(
        FakeSegmenter({"cat": three_cats}), ScriptedChatModel(replies=[REPLIES[0], endpoint_down])
    )
    with pytest.raises(ChatModelError):
        first.run(image, "a cat", output_dir=tmp_path)
    # A later package version with other prompts: the session goes on with its own.
    resumed = _agent(three_cats, REPLIES[1:])
    resumed.system_prompt = "a different system prompt"
    result = resumed.run(image, "a cat", output_dir=tmp_path, resume=True)
    assert result.status == "masks" and result.rounds == 2
    sent = resumed.chat_model.main_calls[0][0].joined_text  # type: ignore[attr-defined]
    assert sent == (tmp_path / "system_prompt.txt").read_text() == first.system_prompt


def test_an_edited_prompt_file_is_refused(
    tmp_path: Path, image: np.ndarray, three_cats: Detections
) -> None:
    _agent(three_cats, REPLIES[:1], max_rounds=1).run(image, "a cat", output_dir=tmp_path)
    (tmp_path / "checker_prompt.txt").write_text("tampered")
    with pytest.raises(ResumeError, match=r"checker_prompt\.txt changed"):
        _agent(three_cats, REPLIES[1:], max_rounds=1).run(
            image, "a cat", output_dir=tmp_path, resume=True
        )


def _stored_rle(mask: np.ndarray) -> dict[str, Any]:
    doc = detections_to_json(Detections.from_masks(mask[None], [0.9]))
    assert doc is not None
    [rle] = doc["rle"]
    return rle


def _pycocotools_rle(mask: np.ndarray) -> dict[str, Any]:
    encoded = mask_utils.encode(np.asfortranarray(mask, dtype=np.uint8))
    return {"size": list(mask.shape), "counts": encoded["counts"].decode()}


@settings(max_examples=200, deadline=None)
@given(mask=arrays(np.bool_, st.tuples(st.integers(1, 9), st.integers(1, 9))))
def test_masks_are_stored_as_the_same_coco_rle_pycocotools_writes(mask: np.ndarray) -> None:
    assert _stored_rle(mask) == _pycocotools_rle(mask)


@pytest.mark.parametrize("fill", ["empty", "full", "full height", "corner"])
def test_coco_rle_edges(fill: str) -> None:
    mask = np.zeros((7, 5), dtype=bool)
    if fill == "full":
        mask[:] = True
    elif fill == "full height":
        mask[:, 1:4] = True
    elif fill == "corner":
        mask[-1, -1] = True
    assert _stored_rle(mask) == _pycocotools_rle(mask)


@pytest.mark.parametrize(
    "damage",
    [
        lambda saved: saved.pop("trace_bytes"),
        lambda saved: saved["state"].update(steps=[{"round": 1}]),
        lambda saved: saved["state"].update(current={"rle": "x"}),
        lambda saved: saved.update(prompts=None),
    ],
)
def test_a_damaged_state_is_refused(
    tmp_path: Path, image: np.ndarray, three_cats: Detections, damage: Callable[[dict], object]
) -> None:
    first = Sam3Agent(
        FakeSegmenter({"cat": three_cats}), ScriptedChatModel(replies=[REPLIES[0], endpoint_down])
    )
    with pytest.raises(ChatModelError):
        first.run(image, "a cat", output_dir=tmp_path)
    saved = json.loads((tmp_path / STATE_FILE).read_text())
    damage(saved)
    (tmp_path / STATE_FILE).write_text(json.dumps(saved))
    with pytest.raises(ResumeError, match="is damaged"):
        _agent(three_cats, REPLIES[1:]).run(image, "a cat", output_dir=tmp_path, resume=True)


def test_a_directory_in_use_by_a_running_session_is_refused(
    tmp_path: Path, image: np.ndarray, three_cats: Detections
) -> None:
    first = Sam3Agent(
        FakeSegmenter({"cat": three_cats}), ScriptedChatModel(replies=[REPLIES[0], endpoint_down])
    )
    with pytest.raises(ChatModelError):
        first.run(image, "a cat", output_dir=tmp_path)
    running = DirectoryLock(tmp_path, resuming=True)  # as another live process would hold it
    try:
        with pytest.raises(ResumeError, match="in use by another running session"):
            _agent(three_cats, REPLIES[1:]).run(image, "a cat", output_dir=tmp_path, resume=True)
        with pytest.raises(UserError, match="in use by another running session"):
            _agent(three_cats, REPLIES).run(image, "a cat", output_dir=tmp_path)
    finally:
        running.close()
    resumed = _agent(three_cats, REPLIES[1:]).run(image, "a cat", output_dir=tmp_path, resume=True)
    assert resumed.status == "masks"


def test_any_string_a_model_or_user_wrote_is_committed_and_read_back(
    tmp_path: Path, image: np.ndarray
) -> None:
    odd = "half an emoji \ud83d, a NUL \x00, a line separator \u2028 and </script>"
    config = AgentConfig()
    fingerprint = Fingerprint.of(query=odd, image=image, config=config, model="m")
    checkpoint = Checkpoint.start(tmp_path, fingerprint, system_prompt="s", checker_prompt="c")
    step = ActionStep(1, odd, "correction", Observation(odd), ToolCall(odd, {odd: [odd]}), odd)
    state = SessionState(
        round=1, corrections=1, steps=[step], phrases=[odd], usage=Usage(), timings={odd: 1.0}
    )
    checkpoint.commit(state)
    checkpoint.close()
    assert request_key([ChatMessage.text("user", odd)], None)  # a digest, not an error
    saved = load_saved(tmp_path)
    back = SessionState.from_json(saved["state"], load_image=lambda d: IMAGES[0], image_size=(H, W))
    assert back.steps == [step] and back.phrases == [odd] and back.timings == {odd: 1.0}
    assert Fingerprint.from_json(saved["fingerprint"]) == fingerprint


class CuttingEmbedding:
    """A SAM 3 stand-in that reads only a phrase's first 5 characters."""

    image_size = (H, W)

    def __init__(self) -> None:
        self.calls = 0

    def segment(self, phrases: list[str], score_threshold: float) -> list[Detections]:
        self.calls += 1
        return [Detections.empty(H, W) for _ in phrases]

    def used_phrase(self, phrase: str) -> str:
        return phrase[:5]


def test_a_replayed_sam3_result_keeps_how_the_phrase_was_read(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_FILE
    first = CuttingEmbedding()
    live = JournaledSegmenter(SimpleNamespace(embed=lambda image: first), Journal(path, 1, []))  # type: ignore[arg-type]
    embedding = live.embed(np.zeros((H, W, 3), np.uint8))
    assert len(embedding.segment(["a long phrase"], 0.5)[0]) == 0
    second = CuttingEmbedding()
    second.used_phrase = lambda phrase: phrase  # type: ignore[method-assign]  # would not cut
    replay = Journal(path, 1, read_journal(path))
    resumed = JournaledSegmenter(SimpleNamespace(embed=lambda image: second), replay)  # type: ignore[arg-type]
    again = resumed.embed(np.zeros((H, W, 3), np.uint8))
    again.segment(["a long phrase"], 0.5)
    assert second.calls == 0  # answered from the journal
    assert again.used_phrase("a long phrase") == "a lon"  # type: ignore[attr-defined]
