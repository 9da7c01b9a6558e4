from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import jinja2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from sam3_agent.agent import prompts
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.result import AgentResult
from sam3_agent.agent.tools import TOOLS, tool_docs
from sam3_agent.apps.cli.main import app
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.store import reading
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import UserError
from tests.support.eval_fixtures import make_chat_model, make_segmenter, write_reasonseg
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool


def test_system_prompt_teaches_the_protocol_and_every_tool() -> None:
    agent = Sam3Agent(segmenter=None, chat_model=None)  # type: ignore[arg-type]
    text = agent.system_prompt
    for name in TOOLS:
        assert name in text
    for tag in ("<think>", "</think>", "<tool>", "</tool>"):
        assert tag in text
    assert "first tool call must be segment_phrase or report_no_mask" in text


def test_checker_prompt_names_the_verdict_format() -> None:
    text = prompts.default_prompt_set().render("checker_system")
    assert "<verdict>Accept</verdict>" in text and "<verdict>Reject</verdict>" in text


def test_missing_variable_is_an_error() -> None:
    with pytest.raises(jinja2.UndefinedError):
        prompts.default_prompt_set().render("user_task", query="x")
    with pytest.raises(jinja2.UndefinedError):
        prompts.default_prompt_set().feedback("masks_found", phrase="cat")


def test_unknown_feedback_is_an_error() -> None:
    with pytest.raises(KeyError):
        prompts.default_prompt_set().feedback("nothing_like_this")


def test_rendering_is_deterministic() -> None:
    a = prompts.default_prompt_set().render("user_task", query="q", tried_phrases=["b", "a", "c"])
    b = prompts.default_prompt_set().render("user_task", query="q", tried_phrases=["b", "a", "c"])
    assert a == b and a.index('"b"') < a.index('"a"') < a.index('"c"')


@pytest.mark.parametrize(
    ("message", "variables", "expected"),
    [
        ("masks_found", {"phrase": "cat", "count": 1}, "found 1 mask."),
        ("masks_found", {"phrase": "cat", "count": 2}, "found 2 masks."),
        ("numbers_out_of_range", {"bad": [5], "count": 2}, "Mask number 5 does not exist"),
    ],
)
def test_feedback_grammar(message: str, variables: dict[str, object], expected: str) -> None:
    assert expected in prompts.default_prompt_set().feedback(message, **variables)


# --------------------------------------------------------------------------- prompt sets

cli = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def _custom_set(root: Path, edits: dict[str, Callable[[str], str]] | None = None) -> Path:
    """A copy of the canonical set in ``root``, each file in ``edits`` passed through its edit."""
    root.mkdir(parents=True, exist_ok=True)
    for source in sorted((REPO / "prompts").glob("*.j2")):
        text = source.read_text(encoding="utf-8")
        edit = (edits or {}).get(source.name)
        if edit is not None:
            text = edit(text)
        (root / source.name).write_text(text, encoding="utf-8")
    return root


def _marked(marker: str) -> dict[str, Callable[[str], str]]:
    """Edits that put ``marker`` into the system prompt and every segment_phrase result."""
    return {
        "system.j2": lambda t: f"{marker} system.\n{t}",
        "feedback.j2": lambda t: t.replace(
            "{% macro masks_found(phrase, count) -%}\n",
            "{% macro masks_found(phrase, count) -%}\n" + marker + " ",
        ),
    }


def test_the_canonical_set_is_the_top_level_prompts_folder() -> None:
    canonical = prompts.default_prompt_set()
    assert Path(canonical.path) == REPO / "prompts"
    assert canonical.name == "builtin"
    assert set(canonical.sources) == {f"{t}.j2" for t in prompts.TEMPLATES}
    assert not (REPO / "sam3_agent" / "prompts").exists()  # one copy, not two
    assert prompts.load_prompt_set(REPO / "prompts").version == canonical.version


def test_version_is_a_hash_of_the_templates(tmp_path: Path) -> None:
    same = prompts.load_prompt_set(_custom_set(tmp_path / "same"))
    other = prompts.load_prompt_set(_custom_set(tmp_path / "other", _marked("NOTE")))
    canonical = prompts.default_prompt_set()
    assert same.version == canonical.version
    assert other.version != canonical.version
    assert other.version.startswith("sha256:") and len(other.version) == len("sha256:") + 16
    assert other.describe() == {
        "name": "other",
        "path": str((tmp_path / "other").resolve()),
        "version": other.version,
    }


def test_an_agent_uses_its_own_prompt_set(
    tmp_path: Path, image: np.ndarray, three_cats: Detections
) -> None:
    folder = _custom_set(tmp_path / "mine", _marked("CUSTOM-SET"))
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="cat"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ]
    )
    agent = Sam3Agent(FakeSegmenter({"cat": three_cats}), chat, AgentConfig(prompts_dir=folder))
    result = agent.run(image, "a cat", output_dir=tmp_path / "out")
    assert result.status == "masks"
    assert agent.system_prompt.startswith("CUSTOM-SET system.")
    last_context = chat.main_calls[-1]
    assert last_context[0].joined_text.startswith("CUSTOM-SET system.")
    assert any("CUSTOM-SET segment_phrase" in m.joined_text for m in last_context)
    written = json.loads((tmp_path / "out" / "result.json").read_text())
    assert written["prompts"] == prompts.load_prompt_set(folder).describe()
    assert written["prompts"]["version"] != prompts.default_prompt_set().version
    # The canonical set is untouched by an agent holding another.
    canonical = prompts.default_prompt_set()
    assert "CUSTOM-SET" not in canonical.feedback("masks_found", phrase="cat", count=2)


def test_concurrent_agents_keep_their_sets_apart(
    tmp_path: Path, image: np.ndarray, three_cats: Detections
) -> None:
    def script() -> ScriptedChatModel:
        return ScriptedChatModel(
            replies=[
                tool("segment_phrase", text_prompt="cat"),
                tool("examine_each_mask"),
                tool("select_masks_and_return", final_answer_masks=[1]),
            ],
            delay_s=0.01,  # interleave the two sessions' calls
        )

    chats = {"A": script(), "B": script()}
    agents = {
        label: Sam3Agent(
            FakeSegmenter({"cat": three_cats}),
            chats[label],
            AgentConfig(prompts_dir=_custom_set(tmp_path / label, _marked(f"SET-{label}"))),
        )
        for label in chats
    }

    async def both() -> list[AgentResult]:
        return list(await asyncio.gather(*(a.arun(image, "a cat") for a in agents.values())))

    results = asyncio.run(both())
    assert [r.status for r in results] == ["masks", "masks"]
    for label, other in (("A", "B"), ("B", "A")):
        texts = [m.joined_text for call in chats[label].main_calls for m in call]
        assert any(f"SET-{label} segment_phrase" in t for t in texts)
        assert not any(f"SET-{other}" in t for t in texts)
        assert chats[label].check_calls  # checks ran inside the session, with its set


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        if old not in text:
            raise AssertionError(f"{old!r} is not in the template")
        return text.replace(old, new)

    return edit


def _rename_argument(macro: str, old: str, new: str) -> Callable[[str], str]:
    """Rename one macro's argument, in its signature and its body (a consistent macro)."""

    def edit(text: str) -> str:
        start = text.index(f"{{% macro {macro}(")
        end = text.index("{%- endmacro %}", start)
        body = re.sub(rf"\b{old}\b", new, text[start:end])
        return text[:start] + body + text[end:]

    return edit


BROKEN_SETS: list[tuple[str, dict[str, Callable[[str], str]], str]] = [
    ("syntax", {"system.j2": lambda t: t + "\n{% if protocol %}"}, "system.j2 line"),
    ("unknown variable", {"user_task.j2": lambda t: t + "{{ qurey }}"}, "user_task.j2 uses qurey"),
    (
        "unknown variable in a macro",
        {"feedback.j2": _replace("{{ count }} mask", "{{ cuont }} mask")},
        "feedback.j2 uses cuont",
    ),
    (
        "macro missing",
        {"feedback.j2": _replace("macro no_masks(phrase)", "macro no_masks_at_all(phrase)")},
        "no macro no_masks",
    ),
    (
        "macro arguments differ",
        {"feedback.j2": _rename_argument("empty_selection", "count", "n")},
        "macro empty_selection takes (n); the agent passes (count)",
    ),
    (
        "does not render",
        {"checker_user.j2": lambda t: t + "{{ number + query }}"},
        "checker_user.j2 does not render: TypeError",
    ),
    (
        "macro does not render",
        {
            "feedback.j2": _replace(
                '{{ "is" if used == 1', '{{ used|join(", ") }}{{ "is" if used == 1'
            )
        },
        "feedback.j2 macro check_budget_spent does not render",
    ),
]


@pytest.mark.parametrize(
    ("edits", "message"), [(e, m) for _, e, m in BROKEN_SETS], ids=[n for n, _, _ in BROKEN_SETS]
)
def test_a_broken_set_is_refused_in_one_line(
    tmp_path: Path, edits: dict[str, Callable[[str], str]], message: str
) -> None:
    folder = _custom_set(tmp_path / "broken", edits)
    with pytest.raises(UserError, match=re.escape(message)) as caught:
        prompts.load_prompt_set(folder)
    assert "\n" not in str(caught.value)
    assert str(folder.resolve()) in str(caught.value)


@pytest.mark.parametrize("name", [f"{t}.j2" for t in prompts.TEMPLATES])
def test_a_set_missing_a_template_is_refused(tmp_path: Path, name: str) -> None:
    folder = _custom_set(tmp_path / "partial")
    (folder / name).unlink()
    with pytest.raises(UserError, match=f"lacks {re.escape(name)}"):
        prompts.load_prompt_set(folder)


def test_not_a_directory_or_not_utf8_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a directory"):
        prompts.load_prompt_set(tmp_path / "nowhere")
    folder = _custom_set(tmp_path / "latin1")
    (folder / "system.j2").write_bytes("Caf\xe9".encode("latin-1"))
    with pytest.raises(UserError, match=re.escape("system.j2 is not UTF-8")):
        prompts.load_prompt_set(folder)


def test_extra_templates_may_be_included(tmp_path: Path) -> None:
    folder = _custom_set(
        tmp_path / "parts", {"system.j2": lambda t: t + '\n{% include "rules.j2" %}'}
    )
    (folder / "rules.j2").write_text("Extra rule: be brief.")
    loaded = prompts.load_prompt_set(folder)
    assert "Extra rule: be brief." in loaded.render("system", tools=[], protocol="tags")


@given(
    text=st.text(
        alphabet=st.characters(blacklist_characters="{}#%\r", blacklist_categories=("Cs",)),
        max_size=40,
    )
)
@settings(max_examples=25, deadline=None)
def test_any_text_outside_jinja_syntax_makes_a_valid_set(text: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="prompt-set-"))
    try:
        _custom_set(folder, {"checker_system.j2": lambda t: text + t})
        loaded = prompts.load_prompt_set(folder)
        canonical = (REPO / "prompts" / "checker_system.j2").read_text(encoding="utf-8")
        assert loaded.render("checker_system") == (text + canonical).strip()
        assert (loaded.version == prompts.default_prompt_set().version) == (text == "")
    finally:
        shutil.rmtree(folder)


@pytest.mark.slow
def test_the_wheel_ships_the_canonical_set(tmp_path: Path) -> None:
    """Build a wheel from this checkout, unpack it, and find the set from the installed copy."""
    pytest.importorskip("setuptools", reason="building a wheel without isolation needs it")
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("sam3_agent", "prompts"):
        shutil.copytree(
            REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    assert {f"sam3_agent/_prompts/{t}.j2" for t in prompts.TEMPLATES} <= names
    assert not any(n.startswith("prompts/") for n in names)
    probe = (
        "import json; from sam3_agent.agent import prompts; p = prompts.default_prompt_set(); "
        "print(json.dumps(p.describe()))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    shown = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    installed = json.loads(shown.stdout)
    assert installed["path"] == str(tmp_path / "site" / "sam3_agent" / "_prompts")
    assert installed["version"] == prompts.default_prompt_set().version


# --------------------------------------------------------------------------- --prompts


def _no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_models(self: BackendSpec) -> object:
        raise AssertionError("models must not be built for a broken prompt set")

    monkeypatch.setattr(BackendSpec, "build_segmenter", no_models)
    monkeypatch.setattr(BackendSpec, "build_chat_model", no_models)


@pytest.mark.parametrize("command", ["run", "eval"])
def test_a_broken_set_fails_before_any_model_loads(
    command: str, tmp_path: Path, image: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_models(monkeypatch)
    broken = _custom_set(tmp_path / "broken", {"user_task.j2": lambda t: t + "{{ qurey }}"})
    if command == "run":
        photo = tmp_path / "photo.png"
        Image.fromarray(image).save(photo)
        args = ["run", str(photo), "a cat", "--out", str(tmp_path / "out")]
    else:
        root = write_reasonseg(tmp_path / "ReasonSeg")
        args = ["eval", "--no-progress", "--dataset", "reasonseg", "--root", str(root)]
        args += ["--out", str(tmp_path / "run")]
    result = cli.invoke(app, [*args, "--prompts", str(broken)])
    assert result.exit_code == 2, result.output
    assert "user_task.j2 uses qurey" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "run").exists()


def test_run_records_the_set_it_used(
    tmp_path: Path, image: np.ndarray, three_cats: Detections, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = ScriptedChatModel(
        replies=[tool("segment_phrase", text_prompt="cat"), tool("report_no_mask")]
    )
    monkeypatch.setattr(
        BackendSpec, "build_segmenter", lambda self: FakeSegmenter({"cat": three_cats})
    )
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: chat)
    photo = tmp_path / "photo.png"
    Image.fromarray(image).save(photo)
    folder = _custom_set(tmp_path / "terse", _marked("TERSE"))
    out = tmp_path / "out"
    result = cli.invoke(
        app, ["run", str(photo), "a cat", "--out", str(out), "--prompts", str(folder)]
    )
    assert result.exit_code == 0, result.output
    recorded = json.loads((out / "result.json").read_text())["prompts"]
    assert recorded == {
        "name": "terse",
        "path": str(folder.resolve()),
        "version": prompts.load_prompt_set(folder).version,
    }
    assert "TERSE segment_phrase" in chat.main_calls[-1][-1].joined_text
    assert (out / "system_prompt.txt").read_text().startswith("TERSE system.")


def test_an_eval_run_directory_refuses_another_prompt_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(BackendSpec, "build_segmenter", lambda self: make_segmenter())
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: make_chat_model())
    root = write_reasonseg(tmp_path / "ReasonSeg")
    run = tmp_path / "run"
    base = [
        "eval",
        "--no-progress",
        "--dataset",
        "reasonseg",
        "--root",
        str(root),
        "--out",
        str(run),
    ]
    assert cli.invoke(app, base).exit_code == 0
    with reading(run, SampleResult.from_json) as store:
        settings_doc = store.config() or {}
    assert settings_doc["agent"]["prompts"] == prompts.default_prompt_set().identity()

    # The same templates elsewhere are the same set: the run resumes.
    same = _custom_set(tmp_path / "builtin")
    assert cli.invoke(app, [*base, "--prompts", str(same)]).exit_code == 0
    other = _custom_set(tmp_path / "other", _marked("OTHER"))
    refused = cli.invoke(app, [*base, "--prompts", str(other)])
    assert refused.exit_code == 2
    assert "different settings" in refused.stderr and "prompts" in refused.stderr


@pytest.mark.parametrize(
    ("policy", "edits", "seen_in_main"),
    [
        (
            "summary",
            {
                "digest_system.j2": lambda t: f"SET-D digest system.\n{t}",
                "digest_user.j2": lambda t: f"SET-D digest user.\n{t}",
                "context_digests.j2": lambda t: f"SET-D digests.\n{t}",
            },
            "SET-D digests.",
        ),
        (
            "hierarchical",
            {"context_archive.j2": lambda t: f"SET-H archive.\n{t}"},
            "SET-H archive.",
        ),
    ],
)
def test_context_notes_and_digests_render_with_the_agents_set(
    tmp_path: Path,
    image: np.ndarray,
    three_cats: Detections,
    policy: str,
    edits: dict[str, Callable[[str], str]],
    seen_in_main: str,
) -> None:
    folder = _custom_set(tmp_path / "ctx", edits)
    replies = [tool("segment_phrase", text_prompt="dog"), tool("segment_phrase", text_prompt="cat")]
    replies += ["no tool here " * 40] * 4 + [
        tool("select_masks_and_return", final_answer_masks=[1])
    ]
    chat = ScriptedChatModel(replies=replies)
    # A tight budget, and an early watermark, so that rounds leave the context.
    config = AgentConfig(
        prompts_dir=folder, context_policy=policy, max_context_tokens=2800, context_watermark=0.3
    )
    agent = Sam3Agent(FakeSegmenter({"cat": three_cats}), chat, config)
    assert agent.run(image, "a cat").status == "masks"
    texts = [m.joined_text for call in chat.main_calls for m in call]
    assert any(seen_in_main in t for t in texts)
    if policy == "summary":
        assert chat.digest_calls
        for call in chat.digest_calls:
            assert call[0].joined_text.startswith("SET-D digest system.")
            assert call[1].joined_text.startswith("SET-D digest user.")


def test_a_set_is_checked_once_however_often_it_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI checks a set before the models load, the agent loads it again: one check."""
    checks: list[str] = []
    original = prompts._check
    monkeypatch.setattr(
        prompts, "_check", lambda s, *rest: (checks.append(s.path), original(s, *rest))
    )
    folder = _custom_set(tmp_path / "once", _marked("ONCE"))
    first = prompts.load_prompt_set(folder)
    again = prompts.load_prompt_set(folder, tool_docs=tool_docs())
    assert again is first and checks == [str(folder.resolve())]
    # The tools the agent lists are rendered in too (the sample lists one tool).
    broken = "{% if tools|length > 1 %}{{ tools[0].missing }}{% endif %}{{ protocol }}"
    (folder / "system.j2").write_text(broken)
    assert prompts.load_prompt_set(folder).version != first.version
    with pytest.raises(UserError, match=r"system\.j2 does not render"):
        prompts.load_prompt_set(folder, tool_docs=tool_docs())
