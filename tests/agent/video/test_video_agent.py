"""The video agent end to end: a scripted MLLM over a fake video segmenter on synthetic clips."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sam3_agent.agent.video.agent import Sam3VideoAgent
from sam3_agent.media.video import VideoLoadError
from sam3_agent.values.config import AgentConfig, FrameSelection, VideoOptions
from sam3_agent.values.errors import ChatModelError, ResumeError, UserError
from sam3_agent.values.rle import decode_rle
from tests.support.clips import LEFT_AND_RIGHT, square_mask, write_frames, write_mp4
from tests.support.fakes import FakeVideoSegmenter, ScriptedChatModel, tool

RED, GREEN = LEFT_AND_RIGHT
SQUARES = FakeVideoSegmenter({"square": (RED, GREEN), "red square": (RED,)})


def make_agent(replies: list[str], **kwargs: object) -> tuple[Sam3VideoAgent, ScriptedChatModel]:
    verdicts = kwargs.pop("verdicts", {})
    chat = ScriptedChatModel(replies=list(replies), verdicts=verdicts)  # type: ignore[arg-type]
    segmenter = FakeVideoSegmenter(SQUARES.squares)
    agent = Sam3VideoAgent(segmenter, chat, AgentConfig(), **kwargs)  # type: ignore[arg-type]
    return agent, chat


def test_track_select_writes_every_output(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 12)
    agent, chat = make_agent(
        [
            tool("segment_phrase", text_prompt="square"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ]
    )
    out = tmp_path / "out"
    result = agent.run(clip, "the square that moves left", output_dir=out)
    assert result.status == "masks" and len(result.tracks) == 1
    doc = json.loads((out / "result.json").read_text())
    assert doc["video"]["frames_used"] == list(range(12))
    (track,) = doc["tracks"]
    assert len(track["segmentations"]) == 12
    # The red square (moving left) is the one selected, at its true place in every frame.
    for index, rle in enumerate(track["segmentations"]):
        assert np.array_equal(decode_rle(rle), square_mask(RED, index, (96, 128)))
    overlay = cv2.VideoCapture(str(out / "overlay.mp4"))
    assert int(overlay.get(cv2.CAP_PROP_FRAME_COUNT)) == 12
    overlay.release()
    assert cv2.imread(str(out / "contact_sheet.png")) is not None
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records].count("main") == 2
    # The model saw sheets of frames: the task sheet, then the tracks' sheet.
    assert len(chat.main_calls[1][-1].images) == 1
    assert "Track 1: frames 0 to 11" in chat.main_calls[1][-1].joined_text


def test_a_frame_folder_with_a_selection(tmp_path: Path) -> None:
    folder = write_frames(tmp_path / "frames", 10)
    agent, _ = make_agent(
        [
            tool("segment_phrase", text_prompt="red square"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ],
        selection=FrameSelection(stride=3),
    )
    result = agent.run(folder, "the red square")
    assert result.video["frames_used"] == [0, 3, 6, 9]
    assert result.tracks.frame_count == 4
    assert np.array_equal(result.tracks[0].mask(2), square_mask(RED, 6, (96, 128)))


def test_uncertain_gets_a_closer_look_then_stays_marked(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 12)
    agent, chat = make_agent(
        [
            tool("segment_phrase", text_prompt="square"),
            tool("examine_each_mask"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ],
        verdicts={
            1: ["<verdict>Uncertain</verdict><frames>4-7</frames>", "<verdict>Uncertain</verdict>"],
            2: "<verdict>Reject</verdict>",
        },
        options=VideoOptions(uncertain_looks=1),
    )
    result = agent.run(clip, "the square that moves left", output_dir=tmp_path / "out")
    assert result.status == "masks"
    # Track 1: two looks (uncertain twice), track 2: one (rejected).
    assert len(chat.check_calls) == 3
    second_look = [c for c in chat.check_calls if "closer look" in c[-1].joined_text]
    assert len(second_look) == 1
    feedback = chat.main_calls[2][-1].joined_text
    assert "1 uncertain" in feedback and "1 rejected" in feedback
    assert result.usage.checks.total_tokens > 0


def test_no_track_found_then_report_no_mask(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 6)
    agent, chat = make_agent([tool("segment_phrase", text_prompt="dog"), tool("report_no_mask")])
    result = agent.run(clip, "the dog")
    assert result.status == "no_mask" and len(result.tracks) == 0
    assert "found no tracks" in chat.main_calls[1][-1].joined_text


def test_a_corrupt_video_is_one_line_and_leaves_no_directory(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"nope")
    agent, _ = make_agent([])
    with pytest.raises(VideoLoadError):
        agent.run(bad, "anything", output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_resume_after_a_failed_round_continues_to_the_same_result(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 8)
    out = tmp_path / "out"
    replies = [
        tool("segment_phrase", text_prompt="square"),
        tool("select_masks_and_return", final_answer_masks=[2]),
    ]

    def boom(_: object) -> str:
        raise ChatModelError("endpoint down")

    agent, _ = make_agent([replies[0], boom])  # type: ignore[list-item]
    with pytest.raises(ChatModelError):
        agent.run(clip, "the square that moves right", output_dir=out)
    agent2, chat2 = make_agent([replies[1]])
    result = agent2.run(clip, "the square that moves right", output_dir=out, resume=True)
    assert result.status == "masks" and result.rounds == 2
    assert len(chat2.main_calls) == 1  # round 1 was not asked again
    assert np.array_equal(result.tracks[0].mask(0), square_mask(GREEN, 0, (96, 128)))
    # Another query on that directory is refused.
    agent3, _ = make_agent([])
    with pytest.raises(ResumeError):
        agent3.run(clip, "another query", output_dir=out, resume=True)


def test_a_kill_after_tracking_resumes_without_tracking_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sam3_agent.agent.video import agent as video_session
    from tests.support.resume import Killed

    clip = write_mp4(tmp_path / "clip.mp4", 8)
    out = tmp_path / "out"
    replies = [
        tool("segment_phrase", text_prompt="square"),
        tool("select_masks_and_return", final_answer_masks=[1]),
    ]
    real = video_session.render_sheet

    def dies_on_tracks(video, positions, tracks, **kwargs):  # type: ignore[no-untyped-def]
        if tracks is not None:
            raise Killed  # mid-round: SAM 3 answered, the round is not committed
        return real(video, positions, tracks, **kwargs)

    monkeypatch.setattr(video_session, "render_sheet", dies_on_tracks)
    agent, _ = make_agent(list(replies))
    with pytest.raises(Killed):
        agent.run(clip, "the square that moves left", output_dir=out)
    assert len(agent.video_segmenter.opened[0].tracked) == 1  # type: ignore[attr-defined]
    monkeypatch.setattr(video_session, "render_sheet", real)
    agent2, chat2 = make_agent([replies[1]])
    result = agent2.run(clip, "the square that moves left", output_dir=out, resume=True)
    assert result.status == "masks" and result.rounds == 2
    assert agent2.video_segmenter.opened == []  # type: ignore[attr-defined]
    assert len(chat2.main_calls) == 1  # the round-1 answer came from the journal


def test_the_video_agent_is_the_one_loop_given_the_video_medium() -> None:
    from sam3_agent.agent.loop import Agent, Sam3Agent

    # One run/arun for both media: neither agent overrides them with its own signature.
    for agent_type in (Sam3Agent, Sam3VideoAgent):
        assert issubclass(agent_type, Agent)
        assert agent_type.run is Agent.run and agent_type.arun is Agent.arun
    assert not issubclass(Sam3VideoAgent, Sam3Agent)


def test_an_ended_no_mask_session_resumes_to_its_result(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 6)
    out = tmp_path / "out"
    agent, _ = make_agent([tool("segment_phrase", text_prompt="dog"), tool("report_no_mask")])
    first = agent.run(clip, "the dog", output_dir=out)
    again, chat = make_agent([])
    # The committed ending's empty answer reads back as tracks, not as an image's masks.
    result = again.run(clip, "the dog", output_dir=out, resume=True)
    assert result.status == first.status == "no_mask"
    assert result.tracks.frame_count == 6 and len(result.tracks) == 0
    assert chat.main_calls == []


def test_exports_are_refused_for_a_video(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 4)
    agent, _ = make_agent([])
    with pytest.raises(UserError, match="exports and image_path are for image sessions"):
        agent.run(clip, "the dog", output_dir=tmp_path / "out", exports=["png"])
    assert not (tmp_path / "out").exists()


RED_AND_GREEN = {"red square": (RED,), "green square": (GREEN,)}
KEPT_SCRIPT = [
    tool("segment_phrase", text_prompt="red square"),
    tool("keep_masks", masks=[1]),
    tool("segment_phrase", text_prompt="green square"),
    tool("select_masks_and_return", final_answer_masks=[1]),
]


def kept_agent(chat: object) -> Sam3VideoAgent:
    config = AgentConfig(tool_set="extended")
    return Sam3VideoAgent(FakeVideoSegmenter(RED_AND_GREEN), chat, config)  # type: ignore[arg-type]


def test_kept_tracks_answer_a_query_naming_two_objects(tmp_path: Path) -> None:
    clip = write_mp4(tmp_path / "clip.mp4", 8)
    chat = ScriptedChatModel(replies=list(KEPT_SCRIPT))
    result = kept_agent(chat).run(
        clip, "the red square and the green one", output_dir=tmp_path / "o"
    )
    assert result.status == "masks" and len(result.tracks) == 2
    # Both phrases' track 1, the second renumbered: ids stay one per object in the answer.
    assert [t.track_id for t in result.tracks] == [1, 2]
    for track, square in zip(result.tracks, (RED, GREEN), strict=True):
        assert np.array_equal(track.mask(5), square_mask(square, 5, (96, 128)))
    assert "Kept track 1 as K1; 1 track is kept in all" in chat.main_calls[2][-1].joined_text
    request = next(m for m in chat.main_calls[3] if m.role == "user").joined_text
    assert 'track K1 (from "red square")' in request
    assert "`like`" not in chat.main_calls[0][0].joined_text


@pytest.mark.parametrize("at", range(1, len(KEPT_SCRIPT) + 1))
def test_a_killed_video_session_with_kept_tracks_resumes(tmp_path: Path, at: int) -> None:
    from tests.support.resume import Killed, KilledAt, comparable, trace_records

    clip, query = write_mp4(tmp_path / "clip.mp4", 6), "the red square and the green one"
    expected = kept_agent(ScriptedChatModel(replies=list(KEPT_SCRIPT))).run(
        clip, query, output_dir=tmp_path / "ref"
    )
    scripted = ScriptedChatModel(replies=list(KEPT_SCRIPT))
    with pytest.raises(Killed):
        kept_agent(KilledAt(scripted, at)).run(clip, query, output_dir=tmp_path / "run")
    resumed = kept_agent(scripted).run(clip, query, output_dir=tmp_path / "run", resume=True)
    assert comparable(resumed.to_json()) == comparable(expected.to_json())
    assert trace_records(tmp_path / "run") == trace_records(tmp_path / "ref")
    assert len(resumed.tracks) == 2
