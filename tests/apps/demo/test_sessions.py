"""DemoRunner without a web server: streaming, stop, a closed page, errors, output files."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sam3_agent.agent.loop import STOPPED, Sam3Agent
from sam3_agent.apps.demo.sessions import (
    DISPLAY_SIDE,
    DemoRunner,
    Update,
    final_annotations,
    load_display_image,
    upload_error,
)
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import ChatModelError, ImageLoadError
from sam3_agent.values.messages import ChatMessage, ChatResponse, ToolSpec
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

SEGMENT = tool("segment_phrase", text_prompt="cat")
SELECT_1 = tool("select_masks_and_return", final_answer_masks=[1])


class HangingChat:
    """Answers the scripted replies, then waits forever (until cancelled)."""

    name = "hanging"

    def __init__(self, replies: list[str], error: Exception | None = None) -> None:
        self.replies = list(replies)
        self.error = error
        self.waiting = asyncio.Event()

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        if self.replies:
            return ChatResponse(text=self.replies.pop(0))
        if self.error is not None:
            raise self.error
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.fixture
def image_path(tmp_path: Path, image: np.ndarray) -> Path:
    path = tmp_path / "cats.png"
    Image.fromarray(image).save(path)
    return path


def runner(
    chat: object, three_cats: Detections, tmp_path: Path, config: AgentConfig | None = None
) -> DemoRunner:
    segmenter = FakeSegmenter({"cat": three_cats})
    agent = Sam3Agent(segmenter, chat, config or AgentConfig())  # type: ignore[arg-type]
    return DemoRunner(agent, tmp_path / "runs")


async def collect(stream: object) -> list[Update]:
    return [u async for u in stream]  # type: ignore[attr-defined]


async def test_rounds_stream_then_the_result_and_its_files(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = ScriptedChatModel(replies=[SEGMENT, tool("examine_each_mask"), SELECT_1])
    updates = await collect(runner(chat, three_cats, tmp_path).run("tab-1", image_path, "cat"))

    assert [u.state for u in updates] == ["running", "running", "running", "running", "done"]
    assert [len(u.rounds) for u in updates] == [0, 1, 2, 3, 3]  # the first: it started
    done = updates[-1]
    assert done.result is not None and done.result.status == "masks"
    assert done.output_dir is not None
    names = [f.relative_to(done.output_dir).as_posix() for f in done.files]
    assert names == ["result.json", "overlay.png", "masks/01.png"]  # as --export png names them
    mask = np.asarray(Image.open(done.files[2]))
    np.testing.assert_array_equal(mask == 255, done.result.detections.masks[0])
    assert set(np.unique(mask)) <= {0, 255}
    assert done.output_dir is not None and done.output_dir.parent == tmp_path / "runs"


async def test_result_json_names_the_uploaded_file_not_the_servers_copy(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    # Gradio keeps an upload as <its temp dir>/<hash>/<the file's own name>.
    upload = tmp_path / "gradio" / "0f3a9c" / "holiday photo.png"
    upload.parent.mkdir(parents=True)
    upload.write_bytes(image_path.read_bytes())
    chat = ScriptedChatModel(replies=[SEGMENT, SELECT_1])
    updates = await collect(runner(chat, three_cats, tmp_path).run("tab-1", upload, "cat"))

    done = updates[-1]
    assert done.state == "done" and done.result is not None
    assert done.result.image_path == "holiday photo.png"
    document = json.loads(done.files[0].read_text())
    assert document["image"]["path"] == "holiday photo.png"
    assert str(tmp_path) not in done.files[0].read_text()


async def test_stop_ends_the_session_and_the_agent_writes_what_it_had(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = HangingChat([SEGMENT])
    demo = runner(chat, three_cats, tmp_path)
    assert demo.stop("tab-1") is False  # nothing running yet
    stream = demo.run("tab-1", image_path, "cat")
    started = await stream.__anext__()
    assert started.state == "running" and started.rounds == () and started.output_dir
    first = await stream.__anext__()
    assert first.state == "running" and first.rounds[0].tool == "segment_phrase"
    await chat.waiting.wait()
    assert demo.active == 1 and demo.stop("tab-1") is True
    rest = await collect(stream)

    assert [u.state for u in rest] == ["stopped"]
    assert [f.name for f in rest[0].files] == ["result.json", "overlay.png"]
    document = json.loads(rest[0].files[0].read_text())
    assert document["status"] == "failed" and document["failure"] == STOPPED
    assert demo.active == 0


async def test_a_closed_page_stops_its_session(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = HangingChat([SEGMENT])
    demo = runner(chat, three_cats, tmp_path)
    stream = demo.run("tab-1", image_path, "cat")
    first = await stream.__anext__()
    await chat.waiting.wait()
    await stream.aclose()  # what the web framework does when the page goes away

    assert demo.active == 0
    assert first.output_dir is not None
    document = json.loads((first.output_dir / "result.json").read_text())
    assert document["failure"] == STOPPED


async def test_one_request_per_page_at_a_time(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = HangingChat([SEGMENT])
    demo = runner(chat, three_cats, tmp_path)
    stream = demo.run("tab-1", image_path, "cat")
    await stream.__anext__()
    (refused,) = await collect(demo.run("tab-1", image_path, "dog"))
    assert refused.state == "error" and "already running" in refused.message
    assert refused.output_dir is None  # refused before it started: the page keeps its rounds
    demo.stop("tab-1")
    await collect(stream)


@pytest.mark.parametrize(
    ("name", "query", "message"),
    [
        (None, "cat", "upload an image"),
        ("cats.png", "  ", "the query is empty"),
        ("missing.png", "cat", "image not found: missing.png"),
        ("notes.png", "cat", "cannot read image notes.png: "),
    ],
)
async def test_bad_requests_are_one_line_messages(
    three_cats: Detections,
    image_path: Path,
    tmp_path: Path,
    name: str | None,
    query: str,
    message: str,
):
    (tmp_path / "notes.png").write_text("not an image")
    chat = ScriptedChatModel(replies=[])
    path = tmp_path / name if name is not None else None
    updates = await collect(runner(chat, three_cats, tmp_path).run("tab-1", path, query))
    assert [u.state for u in updates] == ["error"]
    assert message in updates[0].message and "\n" not in updates[0].message
    assert str(tmp_path) not in updates[0].message
    assert chat.calls == []


async def test_an_image_over_the_pixel_limit_says_so_before_any_model_work(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = ScriptedChatModel(replies=[])
    demo = runner(chat, three_cats, tmp_path, AgentConfig(max_image_pixels=1000))
    assert demo.max_pixels == 1000  # the agent's limit (demo --max-pixels)
    updates = await collect(demo.run("tab-1", image_path, "cat"))

    assert [u.state for u in updates] == ["error"]
    message = updates[0].message
    assert "image too large: cats.png is 320x240 = 76800 pixels, over the limit of 1000" in message
    assert str(tmp_path) not in message and "\n" not in message
    assert chat.calls == []
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())

    # The page's preview of the upload applies the same limit and says the same.
    with pytest.raises(ImageLoadError) as refused:
        load_display_image(image_path, max_pixels=demo.max_pixels)
    assert upload_error(image_path, refused.value) == message


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (ChatModelError("endpoint down after 3 tries"), "ChatModelError: endpoint down"),
        (RuntimeError("a bug\nwith two lines"), "RuntimeError: a bug with two lines"),
    ],
)
async def test_failures_during_a_session_are_messages_with_the_files(
    three_cats: Detections, image_path: Path, tmp_path: Path, error: Exception, message: str
):
    chat = HangingChat([SEGMENT], error=error)
    updates = await collect(runner(chat, three_cats, tmp_path).run("tab-1", image_path, "cat"))
    assert [u.state for u in updates] == ["running", "running", "error"]
    assert updates[-1].message.startswith(message)
    if isinstance(error, ChatModelError):  # the agent writes its result before raising
        assert [f.name for f in updates[-1].files] == ["result.json", "overlay.png"]


def test_final_annotations_are_at_display_size(tmp_path: Path, three_cats: Detections):
    from sam3_agent.agent.result import AgentResult, Usage

    big = tmp_path / "big.png"
    Image.fromarray(np.zeros((240 * 8, 320 * 8, 3), np.uint8)).save(big)
    masks = np.repeat(np.repeat(three_cats.masks[:2], 8, axis=1), 8, axis=2)
    result = AgentResult(
        query="cat",
        status="masks",
        detections=Detections.from_masks(masks, [0.9, 0.8]),
        image_size=(1920, 2560),
        rounds=2,
        usage=Usage(),
        timings={"total": 1.0},
        model="m",
    )
    image, masks = final_annotations(big, result)
    assert max(image.shape[:2]) == DISPLAY_SIDE
    assert [label for _, label in masks] == ["1 (0.90)", "2 (0.80)"]
    first = masks[0][0]
    assert first.shape == image.shape[:2] and first.dtype == np.float32
    assert first.sum() == pytest.approx(
        three_cats.masks[0].sum() * (DISPLAY_SIDE / 320) ** 2, rel=0.05
    )


def _system_prompt(chat: ScriptedChatModel, call: int) -> str:
    return chat.main_calls[call][0].joined_text


async def test_the_tool_set_a_request_names_is_the_one_its_session_uses(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = ScriptedChatModel(replies=[SEGMENT, SELECT_1] * 3)
    demo = runner(chat, three_cats, tmp_path)  # the demo's flags: the paper's tools
    for tool_set in ("extended", None, "paper"):
        updates = await collect(demo.run("tab-1", image_path, "cat", tool_set))
        assert updates[-1].state == "done"
    extended, default, paper = (_system_prompt(chat, call) for call in (0, 2, 4))
    assert "`like`" in extended and "`unlike`" in extended
    assert default == paper and "`unlike`" not in paper
    assert demo.agent_with(None) is demo.agent_with("paper") is demo.agent
    assert demo.agent_with("extended") is demo.agent_with("extended")  # built once
    assert demo.agent_with("extended").segmenter is demo.agent.segmenter  # the same models
    assert demo.agent_with("extended").config.max_rounds == demo.agent.config.max_rounds


async def test_the_demos_own_tool_set_is_the_default(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = ScriptedChatModel(replies=[SEGMENT, SELECT_1])
    demo = runner(chat, three_cats, tmp_path, AgentConfig(tool_set="extended"))
    assert (await collect(demo.run("tab-1", image_path, "cat")))[-1].state == "done"
    assert "`unlike`" in _system_prompt(chat, 0)


async def test_an_unknown_tool_set_is_refused_in_one_line_before_any_model_work(
    three_cats: Detections, image_path: Path, tmp_path: Path
):
    chat = ScriptedChatModel(replies=[])
    demo = runner(chat, three_cats, tmp_path)
    updates = await collect(demo.run("tab-1", image_path, "cat", "all"))  # type: ignore[arg-type]
    assert [(u.state, u.message) for u in updates] == [
        ("error", "`tool_set` must be 'paper' or 'extended', got 'all'")
    ]
    assert chat.calls == []
