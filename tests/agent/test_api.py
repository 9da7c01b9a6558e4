"""sam3_agent.segment(): one call that takes every backend option the CLI takes."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sam3_agent
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import UserError
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

PLENTY = memory.MemoryReading("cpu", 1 << 50, 1 << 50)


def scripted_cat() -> ScriptedChatModel:
    return ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="cat"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ]
    )


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch, three_cats: Detections) -> dict[str, BackendSpec]:
    """The specs segment() built its backends from (fakes stand in for the models)."""
    specs: dict[str, BackendSpec] = {}

    def fake_segmenter(self: BackendSpec) -> FakeSegmenter:
        specs["sam3"] = self
        return FakeSegmenter({"cat": three_cats})

    def fake_chat(self: BackendSpec) -> ScriptedChatModel:
        specs["llm"] = self
        return scripted_cat()

    monkeypatch.setattr(BackendSpec, "build_segmenter", fake_segmenter)
    monkeypatch.setattr(BackendSpec, "build_chat_model", fake_chat)
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return specs


def test_segment_builds_the_backends_and_runs_one_session(
    built: dict[str, BackendSpec], image: np.ndarray, tmp_path: Path
) -> None:
    result = sam3_agent.segment(
        image, "a cat", output_dir=tmp_path, sam3_url="http://127.0.0.1:8100", llm_model="m",
        llm_url="http://127.0.0.1:9/v1",
    )  # fmt: skip
    assert result.status == "masks" and len(result.detections) == 1
    assert built["sam3"].sam3_url == "http://127.0.0.1:8100"
    assert (built["llm"].llm_url, built["llm"].llm_model) == ("http://127.0.0.1:9/v1", "m")
    assert (tmp_path / "result.json").is_file()


def test_segment_takes_every_backend_option_the_cli_does(
    built: dict[str, BackendSpec], image: np.ndarray, tmp_path: Path
) -> None:
    options = {
        "sam3_url": "http://127.0.0.1:8100", "sam3_token": "tok", "device": "cpu",
        "dtype": "float32", "llm_url": ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"],
        "llm_model": "m", "llm_api_key": "k", "llm_timeout": 5.0, "tool_protocol": "native",
        "cache": tmp_path / "responses.sqlite", "temperature": 0.5, "max_tokens": 64,
        "seed": 7, "llm_extra": '{"top_k": 5}', "memory_check": False,
    }  # fmt: skip
    flag_names = {f.name for f in fields(BackendSpec)}
    unused_here = {"sam3", "llm", "replay", "sam3_cache_size", "video_cache_mb"}
    assert set(options) | unused_here == flag_names
    sam3_agent.segment(image, "a cat", **options)
    spec = built["llm"]
    assert spec.llm_url == ("http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1")
    assert (spec.dtype, spec.llm_timeout, spec.tool_protocol) == ("float32", 5.0, "native")
    assert spec.generation().extra_body == {"top_k": 5} and spec.seed == 7


def test_segment_takes_a_spec_and_keywords_replace_its_fields(
    built: dict[str, BackendSpec], image: np.ndarray
) -> None:
    spec = BackendSpec(sam3_url="http://127.0.0.1:8100", llm_url="http://a/v1", llm_model="m")
    sam3_agent.segment(image, "a cat", backends=spec, llm_model="other")
    assert built["llm"] == replace(spec, llm_model="other")


def test_the_simple_call_chooses_the_default_mllm(
    built: dict[str, BackendSpec], image: np.ndarray
) -> None:
    result = sam3_agent.segment(image, "the leftmost cat")
    assert result.status == "masks"
    assert built["llm"].llm == "hf:Qwen/Qwen3-VL-4B-Instruct"  # planned: no CUDA here


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"llm_timeout": 0}, "`llm_timeout` must be"),
        ({"temperature": 9.0}, "`temperature`"),
        ({"llm_url": "ftp://x", "llm_model": "m"}, "`llm_url` must be"),
        ({"replay": True}, "`replay=True` answers from the response cache"),
        ({"llm_mdoel": "m"}, "unknown option: llm_mdoel is neither a backend option"),
    ],
)
def test_segment_refuses_a_bad_option_before_anything_loads(
    built: dict[str, BackendSpec], image: np.ndarray, options: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError, match=re.escape(message)) as refused:
        sam3_agent.segment(image, "a cat", **options)
    assert built == {}
    assert "--" not in str(refused.value)  # a Python caller is told settings, not flags


AGENT_ONLY = sorted({f.name for f in fields(AgentConfig)} - {f.name for f in fields(BackendSpec)})


@given(st.sampled_from(AGENT_ONLY))
def test_an_agent_setting_passed_as_a_backend_option_says_where_it_goes(name: str) -> None:
    with pytest.raises(UserError) as refused:
        sam3_agent.segment("never-read.jpg", "a cat", **{name: 0})
    assert str(refused.value) == (
        f"segment() got unknown option: {name} is a field of AgentConfig, not a backend "
        f"option: pass config=AgentConfig({name}=...)"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"scor_threshold": 0.0},
            "segment() got unknown option: scor_threshold is neither a backend option "
            "(BackendSpec) nor a field of AgentConfig (did you mean "
            "config=AgentConfig(score_threshold=...)?)",
        ),
        (
            {"llm_mdoel": "m", "max_rounds": 3},
            "segment() got unknown options: llm_mdoel is neither a backend option (BackendSpec) "
            "nor a field of AgentConfig (did you mean llm_model?); max_rounds is a field of "
            "AgentConfig, not a backend option: pass config=AgentConfig(max_rounds=...)",
        ),
    ],
)
def test_an_unknown_option_is_named_with_the_closest_field(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(UserError) as refused:
        sam3_agent.segment("never-read.jpg", "a cat", **options)
    assert str(refused.value) == message


def test_track_is_the_one_call_for_a_video(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_sam3_video_dir: Path
) -> None:
    from sam3_agent.values.config import FrameSelection
    from tests.support.clips import LEFT_AND_RIGHT, write_mp4
    from tests.support.fakes import FakeVideoSegmenter

    planned: list[bool] = []
    real_plan = BackendSpec.plan

    def plan(self: BackendSpec, **kwargs: object) -> object:
        planned.append(bool(kwargs.get("video")))
        return real_plan(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(BackendSpec, "plan", plan)
    monkeypatch.setattr(
        BackendSpec,
        "build_video_segmenter",
        lambda self: FakeVideoSegmenter({"square": LEFT_AND_RIGHT}),
    )
    script = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="square"),
            tool("select_masks_and_return", final_answer_masks=[2]),
        ]
    )
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: script)
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    clip = write_mp4(tmp_path / "clip.mp4", 6)
    result = sam3_agent.track(
        clip, "the square that moves right", output_dir=tmp_path / "out",
        selection=FrameSelection(stride=2), sam3=str(tiny_sam3_video_dir),
        llm_url="http://127.0.0.1:9/v1", llm_model="m",
    )  # fmt: skip
    assert planned == [True]  # the video model was planned, not the image one
    assert result.status == "masks" and result.video["frames_used"] == [0, 2, 4]
    assert (tmp_path / "out" / "overlay.mp4").is_file()
    with pytest.raises(UserError, match="track\\(\\) got unknown option: nope is neither"):
        sam3_agent.track(clip, "q", nope=1)
    with pytest.raises(UserError, match=re.escape("pass selection=FrameSelection(stride=...)")):
        sam3_agent.track(clip, "q", stride=2)


def test_segment_fetches_an_image_url_and_records_it(
    built: dict[str, BackendSpec], image: np.ndarray, tmp_path: Path
) -> None:
    import hashlib
    import io
    import json

    from PIL import Image

    from tests.support.media_server import Route, media_server

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    with media_server() as server:
        server.routes["/cat.png"] = Route(buffer.getvalue())
        url = server.url("/cat.png")
        result = sam3_agent.segment(
            url, "a cat", output_dir=tmp_path / "o", llm_url="http://127.0.0.1:9/v1",
            llm_model="m",
        )  # fmt: skip
    assert result.status == "masks" and result.image_path == url
    written = json.loads((tmp_path / "o" / "result.json").read_text())["image"]
    assert written["sha256"] == hashlib.sha256(buffer.getvalue()).hexdigest()
    assert written["url"] == url


def test_segment_refuses_another_scheme_before_any_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sam3_agent.values.errors import DownloadError

    def refuse(self: BackendSpec) -> object:
        raise AssertionError("no model may load")

    monkeypatch.setattr(BackendSpec, "build_segmenter", refuse)
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    with pytest.raises(DownloadError, match=r"^ftp://x/a\.png: only http:// and https://"):
        sam3_agent.segment("ftp://x/a.png", "a cat", llm_url="http://127.0.0.1:9/v1", llm_model="m")
