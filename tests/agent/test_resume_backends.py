"""A session resumes only under the backends it started with: the same models, SAM 3, dtype
and generation settings; each refusal names what differs, in one line.

The stand-in backends describe themselves as the real ones built from the same options would
(``BackendSpec.describe()``; ``tests/backends/test_identity.py`` checks that the two agree).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sam3_agent.agent.checkpoint import STATE_FILE, Fingerprint, check_resumable
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import ResumeError
from tests.support.fakes import FakeSegmenter, ScriptedChatModel
from tests.support.resume import QUERY, Killed, KilledAt, comparable
from tests.support.resume_driver import SCRIPT, VERDICTS, cats

# The options a session is started with: an endpoint and a SAM 3 in process.
STARTED: dict[str, Any] = {
    "llm_url": "http://127.0.0.1:9/v1",
    "llm_model": "Qwen/Qwen3-VL-8B-Instruct",
    "sam3": "facebook/sam3",
    "dtype": "bfloat16",
    "temperature": 0.0,
}


def described(**options: Any) -> dict[str, dict[str, Any]]:
    return BackendSpec(**{**STARTED, **options}).describe()


@dataclass
class DescribedChat(ScriptedChatModel):
    """A scripted MLLM that describes itself as ``description`` says."""

    description: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return self.description


@dataclass
class DescribedSegmenter(FakeSegmenter):
    description: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return self.description


def backends(**options: Any) -> tuple[DescribedChat, DescribedSegmenter]:
    parts = described(**options)
    chat = DescribedChat(replies=list(SCRIPT), verdicts=dict(VERDICTS), description=parts["mllm"])
    chat.name = str(parts["mllm"]["--llm-model"] or parts["mllm"]["--llm"]).removeprefix("hf:")
    return chat, DescribedSegmenter({"cat": cats}, description=parts["sam3"])


def killed_session(image: np.ndarray, out: Path) -> DescribedChat:
    """A session started with :data:`STARTED` in ``out``, killed before its third MLLM call."""
    chat, segmenter = backends()
    with pytest.raises(Killed):
        Sam3Agent(segmenter, KilledAt(chat, 3), AgentConfig()).run(image, QUERY, output_dir=out)  # type: ignore[arg-type]
    return chat


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"temperature": 0.7}, "--temperature was 0.0, now 0.7"),
        ({"max_tokens": 512}, "--max-tokens was 4096, now 512"),
        ({"seed": 7}, "--seed was not given, now 7"),
        ({"llm_extra": '{"top_k": 1}'}, '--llm-extra was not given, now {"top_k": 1}'),
        (
            {"llm_model": "other-vlm"},
            "--llm-model was 'Qwen/Qwen3-VL-8B-Instruct', now 'other-vlm'",
        ),
        ({"sam3": "/models/sam3-ft"}, "--sam3 was 'facebook/sam3', now '/models/sam3-ft'"),
        ({"dtype": "float32"}, "--dtype was 'bfloat16', now 'float32'"),
        ({"sam3_url": "http://gpu:8100"}, "--sam3-url was not given, now 'http://gpu:8100'"),
    ],
)
def test_other_backends_or_generation_settings_are_refused_naming_the_difference(
    tmp_path: Path, image: np.ndarray, options: dict[str, Any], named: str
) -> None:
    killed_session(image, tmp_path)
    before = (tmp_path / "trace.jsonl").read_bytes()
    chat, segmenter = backends(**options)
    with pytest.raises(ResumeError) as refused:
        Sam3Agent(segmenter, chat, AgentConfig()).run(
            image, QUERY, output_dir=tmp_path, resume=True
        )
    message = str(refused.value)
    assert named in message and "\n" not in message
    assert chat.calls == [] and segmenter.phrases == []
    assert (tmp_path / "trace.jsonl").read_bytes() == before  # nothing touched


def test_the_same_backends_resume_to_the_uninterrupted_result(
    tmp_path: Path, image: np.ndarray
) -> None:
    chat, segmenter = backends()
    expected = Sam3Agent(segmenter, chat, AgentConfig()).run(
        image, QUERY, output_dir=tmp_path / "ref"
    )
    out = tmp_path / "run"
    killed_session(image, out)
    chat, segmenter = backends()
    chat.replies = list(SCRIPT[2:])  # the first two answers were handed over before the kill
    resumed = Sam3Agent(segmenter, chat, AgentConfig()).run(
        image, QUERY, output_dir=out, resume=True
    )
    assert comparable(resumed.to_json()) == comparable(expected.to_json())
    saved = json.loads((out / STATE_FILE).read_text())["fingerprint"]
    assert saved["backends"] == described()


def test_a_session_saved_before_backends_were_recorded_compares_what_it_recorded(
    tmp_path: Path, image: np.ndarray
) -> None:
    # A session of an older version: its fingerprint has no backends. What it did not
    # record cannot be compared, and is said to be so; what it recorded still is.
    killed_session(image, tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    del state["fingerprint"]["backends"]
    (tmp_path / STATE_FILE).write_text(json.dumps(state))

    found = check_resumable(tmp_path, query=QUERY, image=image, config=AgentConfig())
    assert not found.backends_recorded
    with pytest.raises(ResumeError, match=re.escape("setting max_rounds differs")):
        check_resumable(tmp_path, query=QUERY, image=image, config=AgentConfig(max_rounds=9))

    chat, segmenter = backends(temperature=0.7)
    chat.replies = list(SCRIPT[2:])
    resumed = Sam3Agent(segmenter, chat, AgentConfig()).run(
        image, QUERY, output_dir=tmp_path, resume=True
    )
    assert resumed.status == "masks"
    # From now on the session records its backends.
    saved = json.loads((tmp_path / STATE_FILE).read_text())["fingerprint"]
    assert saved["backends"]["mllm"]["--temperature"] == 0.7


@pytest.mark.parametrize("damaged", [[1], "text", {"mllm": 5}, {"mllm": [["--seed", 1, 2]]}])
def test_damaged_backends_in_a_fingerprint_are_refused_in_one_line(
    tmp_path: Path, image: np.ndarray, damaged: object
) -> None:
    killed_session(image, tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    state["fingerprint"]["backends"] = damaged
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(ResumeError, match=f"{STATE_FILE} is damaged"):
        check_resumable(tmp_path, query=QUERY, image=image, config=AgentConfig())


def test_an_option_of_both_models_is_named_once(image: np.ndarray) -> None:
    def fingerprint(dtype: str) -> Fingerprint:
        spec = BackendSpec(sam3="facebook/sam3", llm="hf:Qwen/Qwen3-VL-2B-Instruct", dtype=dtype)
        return Fingerprint.of(
            query=QUERY, image=image, config=AgentConfig(), model="m", backends=spec.describe()
        )

    assert fingerprint("bfloat16").differences(fingerprint("float32")) == [
        "--dtype was 'bfloat16', now 'float32'"
    ]


def test_backends_that_do_not_describe_themselves_are_compared_by_name(
    tmp_path: Path, image: np.ndarray
) -> None:
    chat = ScriptedChatModel(replies=list(SCRIPT), verdicts=dict(VERDICTS))
    with pytest.raises(Killed):
        Sam3Agent(FakeSegmenter({"cat": cats}), KilledAt(chat, 3), AgentConfig()).run(  # type: ignore[arg-type]
            image, QUERY, output_dir=tmp_path
        )
    saved = json.loads((tmp_path / STATE_FILE).read_text())["fingerprint"]
    assert saved["backends"] == {}  # recorded: nothing described
    other = ScriptedChatModel(replies=list(SCRIPT[2:]), name="another")
    with pytest.raises(ResumeError, match=re.escape("setting model differs ('scripted'")):
        Sam3Agent(FakeSegmenter({"cat": cats}), other, AgentConfig()).run(
            image, QUERY, output_dir=tmp_path, resume=True
        )
