"""``sam3-agent run`` through typer's CliRunner, with the test doubles as backends."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from sam3_agent.agent.loop import STOPPED
from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.spec import BackendSpec, ModelPlan
from sam3_agent.runs import rundirs
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import ChatModelError
from sam3_agent.values.rle import decode_rle
from tests.support.docs import documentation_text
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

runner = CliRunner()
PLENTY = memory.MemoryReading("cpu", 1 << 50, 1 << 50)


@pytest.fixture
def photo(tmp_path: Path, image: np.ndarray) -> Path:
    path = tmp_path / "photo.png"
    Image.fromarray(image).save(path)
    return path


@pytest.fixture
def backends(monkeypatch: pytest.MonkeyPatch, three_cats: Detections) -> dict[str, object]:
    made: dict[str, object] = {
        "segmenter": FakeSegmenter({"cat": three_cats}),
        "chat": ScriptedChatModel(),
    }

    def build_segmenter(self: BackendSpec) -> object:
        made["options"] = self
        return made["segmenter"]

    monkeypatch.setattr(BackendSpec, "build_segmenter", build_segmenter)
    monkeypatch.setattr(BackendSpec, "build_chat_model", lambda self: made["chat"])
    monkeypatch.setattr(memory, "read_memory", lambda device: PLENTY)
    return made


def test_run_writes_files_and_prints_json(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [
        tool("segment_phrase", text_prompt="cat"),
        tool("select_masks_and_return", final_answer_masks=[1, 2]),
    ]
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["run", str(photo), "two cats", "--out", str(out), "--json", "--max-rounds", "4"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "masks" and len(document["masks"]) == 2
    assert document["image"]["path"] == str(photo)
    assert json.loads((out / "result.json").read_text()) == document
    assert (out / "overlay.png").is_file()
    assert len((out / "trace.jsonl").read_text().splitlines()) == 2
    assert "round 1: segment_phrase" in result.stderr


def test_backend_flags_reach_the_factories(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [tool("report_no_mask")]
    result = runner.invoke(
        app,
        [
            "run", str(photo), "x", "--out", str(tmp_path / "o"),
            "--sam3-url", "http://127.0.0.1:8100", "--llm-url", "http://127.0.0.1:9/v1",
            "--llm-model", "qwen", "--tool-protocol", "native",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    options = backends["options"]
    assert isinstance(options, BackendSpec)
    assert options.sam3_url == "http://127.0.0.1:8100"
    assert (options.llm_url, options.llm_model, options.tool_protocol) == (
        "http://127.0.0.1:9/v1",
        "qwen",
        "native",
    )


def test_failed_session_exits_3_and_keeps_files(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = ["no tool"] * 5
    out = tmp_path / "o"
    result = runner.invoke(app, ["run", str(photo), "x", "--out", str(out), "--max-rounds", "2"])
    assert result.exit_code == 3
    assert "failed" in result.stderr
    assert json.loads((out / "result.json").read_text())["status"] == "failed"


def test_missing_image_is_one_clean_line(tmp_path: Path, backends: dict[str, object]) -> None:
    result = runner.invoke(app, ["run", str(tmp_path / "nope.jpg"), "cat"])
    assert result.exit_code == 2
    assert "error: image not found" in result.stderr
    assert "Traceback" not in result.output


def test_corrupt_image_is_one_clean_line(tmp_path: Path, backends: dict[str, object]) -> None:
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    result = runner.invoke(app, ["run", str(bad), "cat"])
    assert result.exit_code == 2
    assert "cannot read image" in result.stderr


def test_backend_failure_is_one_clean_line(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    class Down(ScriptedChatModel):
        async def complete(self, messages, *, tools=None):  # type: ignore[no-untyped-def]
            raise ChatModelError("endpoint http://127.0.0.1:9/v1 unreachable after 5 tries")

    backends["chat"] = Down()
    out = tmp_path / "o"
    result = runner.invoke(app, ["run", str(photo), "x", "--out", str(out)])
    assert result.exit_code == 1
    assert "ChatModelError: endpoint" in result.stderr
    assert "Traceback" not in result.output
    assert json.loads((out / "result.json").read_text())["status"] == "failed"


def test_bad_option_values(photo: Path, backends: dict[str, object]) -> None:
    result = runner.invoke(app, ["run", str(photo), "x", "--max-rounds", "0"])
    assert result.exit_code == 2 and "--max-rounds must be >= 1" in result.stderr
    result = runner.invoke(app, ["run", str(photo), "x", "--tool-protocol", "xml"])
    assert result.exit_code == 2


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("sam3-agent ")


def test_empty_query_fails_before_any_model_loads(
    photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_models(self: BackendSpec) -> object:
        raise AssertionError("models must not be built for a bad query")

    monkeypatch.setattr(BackendSpec, "build_segmenter", no_models)
    monkeypatch.setattr(BackendSpec, "build_chat_model", no_models)
    result = runner.invoke(app, ["run", str(photo), "   "])
    assert result.exit_code == 2 and "query is empty" in result.stderr


# --------------------------------------------------------------------------- validation

NO_MODELS = "models must not be built for a bad option"


@pytest.fixture
def no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: BackendSpec) -> object:
        raise AssertionError(NO_MODELS)

    monkeypatch.setattr(BackendSpec, "build_segmenter", refuse)
    monkeypatch.setattr(BackendSpec, "build_chat_model", refuse)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _floats_outside(low: float, high: float | None) -> st.SearchStrategy[str]:
    below = st.floats(max_value=low, exclude_max=True, allow_nan=False)
    if high is None:
        return st.one_of(st.just("nan"), below).map(str)
    above = st.floats(min_value=high, exclude_min=True, allow_nan=False)
    return st.one_of(st.just("nan"), below, above).map(str)


BAD_VALUES = st.one_of(
    st.tuples(st.just("--llm-timeout"), _floats_outside(0.0, None)),
    st.tuples(st.just("--llm-timeout"), st.sampled_from(["inf", "0", "-0.0"])),
    st.tuples(st.just("--temperature"), _floats_outside(0.0, 2.0)),
    st.tuples(st.just("--score-threshold"), _floats_outside(0.0, 1.0)),
    st.tuples(st.just("--max-image-side"), st.integers(max_value=127).map(str)),
    st.tuples(st.just("--max-rounds"), st.integers(max_value=0).map(str)),
    st.tuples(st.just("--check-concurrency"), st.integers(max_value=0).map(str)),
    st.tuples(st.just("--max-corrections"), st.integers(max_value=-1).map(str)),
    st.tuples(st.just("--max-tokens"), st.integers(max_value=0).map(str)),
    st.tuples(st.just("--seed"), st.integers(max_value=-1).map(str)),
    st.tuples(
        st.just("--llm-extra"),
        st.sampled_from(["[1]", "1", "nope", '"s"', "{", '{"chat_template_kwargs": 3}', "null"]),
    ),
    st.tuples(st.just("--device"), st.sampled_from(["gpu", "cuda:x", "", "CPU", "cuda:"])),
    st.tuples(st.just("--dtype"), st.sampled_from(["fp32", "half", "", "int8"])),
    st.tuples(st.just("--sam3-url"), st.sampled_from(["localhost:8100", "ftp://h", ""])),
    st.tuples(st.just("--llm"), st.sampled_from(["qwen", "hf:", "hf:  "])),
    st.tuples(st.just("--tool-protocol"), st.sampled_from(["xml", "json", ""])),
    st.tuples(st.just("--export"), st.sampled_from(["jpg", "png,svg", "polygon"])),
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bad=BAD_VALUES)
def test_any_bad_option_value_is_one_line_before_models(
    photo: Path, tmp_path: Path, no_models: None, bad: tuple[str, str]
) -> None:
    flag, value = bad
    out = tmp_path / "never"
    result = runner.invoke(app, ["run", str(photo), "cat", "--out", str(out), f"{flag}={value}"])
    assert result.exit_code == 2, (bad, result.output, result.exception)
    assert "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--llm-url", "http://127.0.0.1:9/v1"], "--llm-model is required"),
        (["--replay"], "give --cache FILE"),
        (["--replay", "--cache", "{tmp}/missing.sqlite"], "does not exist"),
        (["--cache", "{tmp}"], "is a directory"),
        (["--llm", "hf:x", "--llm-url", "http://127.0.0.1:9/v1"], "not both"),
        (["--llm", "hf:x", "--llm-extra", '{"top_k": 2}'], "only chat_template_kwargs"),
        (["--out", "{tmp}/afile"], "is a file"),
        (["--out", "{tmp}/afile/below"], "is a file"),
        (["--out", "{tmp}/full"], "not empty"),
        (["--out", "{tmp}/interrupted"], "holds an interrupted session; continue it with --resume"),
        (["--out", "{tmp}/stopped"], "holds an interrupted session; continue it with --resume"),
        (["--out", "/proc/sam3-agent-out"], "cannot create files in /proc"),
    ],
)
def test_contradictions_and_bad_paths_fail_before_models(
    photo: Path, tmp_path: Path, no_models: None, extra: list[str], message: str
) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    (tmp_path / "interrupted").mkdir()  # a session killed before it wrote result.json
    (tmp_path / "interrupted" / "session.json").write_text("{}")
    (tmp_path / "stopped").mkdir()  # Ctrl+C: asyncio cancels the session, which writes a result
    (tmp_path / "stopped" / "session.json").write_text("{}")
    (tmp_path / "stopped" / "result.json").write_text(json.dumps({"failure": STOPPED}))
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "o")]
    result = runner.invoke(app, ["run", str(photo), "cat", *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unwritable_out_is_refused(
    photo: Path, tmp_path: Path, no_models: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tests may run as root, for whom every directory is writable: fake the answer.
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if Path(p) == locked else real_access(p, mode)
    )
    result = runner.invoke(app, ["run", str(photo), "cat", "--out", str(locked / "run")])
    assert result.exit_code == 2 and "is not writable" in result.stderr


def test_sam3_only_ignores_chat_flags_but_checks_values(
    photo: Path, tmp_path: Path, no_models: None
) -> None:
    result = runner.invoke(
        app,
        ["run", str(photo), "cat", "--mode", "sam3-only", "--llm-timeout", "nan",
         "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert result.exit_code == 2 and "--llm-timeout" in result.stderr


# --------------------------------------------------------------------------- output dirs


def _ok_run(chat: object) -> None:
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [
        tool("segment_phrase", text_prompt="cat"),
        tool("select_masks_and_return", final_answer_masks=[1]),
    ]


def test_overwrite_replaces_only_a_previous_runs_files(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    out = tmp_path / "o"
    _ok_run(backends["chat"])
    assert runner.invoke(app, ["run", str(photo), "cat", "--out", str(out)]).exit_code == 0
    stale = out / "images" / "stale-render.jpg"
    stale.write_bytes(b"old")
    again = runner.invoke(app, ["run", str(photo), "cat", "--out", str(out)])
    assert again.exit_code == 2 and "--overwrite" in again.stderr
    _ok_run(backends["chat"])
    again = runner.invoke(app, ["run", str(photo), "cat", "--out", str(out), "--overwrite"])
    assert again.exit_code == 0, again.output
    assert not stale.exists() and (out / "result.json").is_file()
    (out / "my-notes.txt").write_text("keep me")
    refused = runner.invoke(app, ["run", str(photo), "cat", "--out", str(out), "--overwrite"])
    assert refused.exit_code == 2 and "my-notes.txt" in refused.stderr
    assert (out / "my-notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    "url", ["ftp://example.com/cat.jpg", "file:///tmp/a.png", "data:image/png;base64,AAAA"]
)
def test_a_url_of_another_scheme_is_refused_by_name(
    url: str, no_models: None, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["run", url, "cat", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert f"{url}: only http:// and https:// URLs are fetched" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_an_image_url_is_fetched_once_and_recorded(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    from tests.support.media_server import Route, media_server

    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [
        tool("segment_phrase", text_prompt="cat"),
        tool("select_masks_and_return", final_answer_masks=[1]),
    ]
    data = photo.read_bytes()
    with media_server() as server:
        server.routes["/pics/photo.png"] = Route(data)
        url = server.url("/pics/photo.png")
        out = tmp_path / "out"
        result = runner.invoke(app, ["run", url, "a cat", "--out", str(out), "--json"])
        assert server.hits("/pics/photo.png") == 1
        # Resuming the ended session reads it back without models and keeps its source.
        again = runner.invoke(app, ["run", url, "a cat", "--resume", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert again.exit_code == 0, again.output
    image = json.loads((out / "result.json").read_text())["image"]
    assert image["url"] == url and image["path"] == url
    assert image["sha256"] == hashlib.sha256(data).hexdigest()
    assert image["height"] == Image.open(photo).height


@pytest.mark.parametrize(
    ("route", "said"), [("/gone.png", "HTTP 404"), ("/page.png", "not an image")]
)
def test_a_url_that_cannot_be_fetched_is_one_line_and_writes_nothing(
    route: str, said: str, tmp_path: Path, no_models: None
) -> None:
    from tests.support.media_server import Route, media_server

    with media_server() as server:
        server.routes["/page.png"] = Route(b"<html>not a picture</html>")
        url = server.url(route)
        result = runner.invoke(app, ["run", url, "cat", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert (len(lines) == 1 and lines[0].endswith(said)) or said in lines[-1], result.stderr
    assert url in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_max_download_mb_is_checked_before_models(photo: Path, no_models: None) -> None:
    result = runner.invoke(app, ["run", str(photo), "cat", "--max-download-mb", "0"])
    assert result.exit_code == 2 and "--max-download-mb must be >= 1" in result.stderr


def test_overwrite_refuses_a_directory_a_running_session_holds(
    photo: Path, tmp_path: Path, no_models: None
) -> None:
    from sam3_agent.agent.checkpoint.store import DirectoryLock

    out = tmp_path / "o"
    live = DirectoryLock(out, resuming=False)  # stands for a session still running there
    try:
        (out / "result.json").write_text("{}")
        (out / "trace.jsonl").write_text("")
        refused = runner.invoke(app, ["run", str(photo), "cat", "--out", str(out), "--overwrite"])
        assert refused.exit_code == 2, refused.output
        assert "in use by a running session" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert (out / "trace.jsonl").exists() and (out / ".session.lock").exists()
    finally:
        live.close()


def test_default_directories_differ_within_one_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundirs.time, "strftime", lambda fmt: "20260101-000000")
    first = rundirs.claim_default_run_dir("photo-cat", root=tmp_path / "runs")
    second = rundirs.claim_default_run_dir("photo-cat", root=tmp_path / "runs")
    assert first != second and first.is_dir() and second.is_dir()
    assert second.name == first.name + "-2"


# `sam3-agent` as `python -m sam3_agent.apps.cli.main` starts it, with every retry's backoff
# at zero: the attempts and the one error line are the same, without 15 s of waiting.
_WITHOUT_BACKOFF = (
    "from sam3_agent.backends.retry import RetryPolicy\n"
    "RetryPolicy.delay = lambda self, retry, retry_after_s, rng=None: 0.0\n"
    "from sam3_agent.apps.cli.main import app\n"
    "app(prog_name='sam3-agent')\n"
)


def run_in_own_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sam3-agent run ARGS`` in a process of its own, with the logging setup a user gets."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_BACKOFF, "run", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("out", [None, "new/run", "made-by-me"])
def test_an_unreachable_sam3_service_is_one_line_and_leaves_no_directory(
    photo: Path, tmp_path: Path, out: str | None
) -> None:
    """In a process of its own, where the logging setup of ``run`` is the one a user gets."""
    (tmp_path / "made-by-me").mkdir()
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        args = [str(photo), "cat", "--sam3-url", url, "--llm-url", f"{url}/v1", "--llm-model", "m"]
        args += ["--out", out] if out is not None else []
        done = run_in_own_process(args, tmp_path)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: SegmenterError: SAM 3 service at {url} failed 4 time(s)")
    assert line.endswith("is the service running there (`sam3-agent serve-sam3`)?")
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "new").exists()
    assert (tmp_path / "made-by-me").is_dir()  # the user's own directory stays


def test_an_unreachable_mllm_endpoint_is_one_line_too(
    photo: Path, tmp_path: Path, tiny_sam3_dir: Path
) -> None:
    """The MLLM client's retries are progress as the SAM 3 client's are: only the error shows."""
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        args = [str(photo), "cat", "--sam3", str(tiny_sam3_dir), "--device", "cpu"]
        args += ["--llm-url", url, "--llm-model", "m", "--out", "out"]
        done = run_in_own_process(args, tmp_path)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: ChatModelError: MLLM endpoint {url} (model m) failed 6 times")


def test_the_docs_name_default_directories_as_run_makes_them(
    tmp_path: Path, backends: dict[str, object], monkeypatch: pytest.MonkeyPatch, image: np.ndarray
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rundirs.time, "strftime", lambda fmt: "20260101-120000")
    Image.fromarray(image).save("photo.png")
    for _ in range(2):  # in the same second
        done = runner.invoke(app, ["run", "photo.png", "the cat", "--mode", "sam3-only"])
        assert done.exit_code == 0, done.output
    made = sorted(f"runs/{d.name}" for d in (tmp_path / "runs").iterdir())
    readme = " ".join(documentation_text().split())
    assert len(made) == 2 and made[1] == made[0] + "-2"
    for name in made:
        assert f"`{name}`" in readme, name


def test_default_out_dir_is_claimed_after_the_image_is_read(
    tmp_path: Path, backends: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", str(tmp_path / "missing.jpg"), "cat"])
    assert result.exit_code == 2
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- sam3-only, export


def test_sam3_only_writes_every_mask_above_threshold_without_a_chat_model(
    photo: Path, tmp_path: Path, backends: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_chat(self: BackendSpec) -> object:
        raise AssertionError("sam3-only needs no MLLM")

    monkeypatch.setattr(BackendSpec, "build_chat_model", no_chat)
    out = tmp_path / "o"
    result = runner.invoke(
        app,
        ["run", str(photo), "cat", "--mode", "sam3-only", "--score-threshold", "0.75",
         "--out", str(out), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "masks" and document["model"] == "sam3-only"
    assert [m["score"] for m in document["masks"]] == [0.9, 0.8]
    assert document["rounds"] == 0
    assert (out / "overlay.png").is_file()
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert trace == [{"mode": "sam3-only", "phrase": "cat", "detected": 3, "kept": 2}]


def test_export_writes_binary_masks_polygons_and_a_legend(
    photo: Path, tmp_path: Path, backends: dict[str, object], three_cats: Detections
) -> None:
    out = tmp_path / "o"
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [
        tool("segment_phrase", text_prompt="cat"),
        tool("select_masks_and_return", final_answer_masks=[1, 3]),
    ]
    result = runner.invoke(
        app, ["run", str(photo), "cat", "--out", str(out), "--export", "png, polygons"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads((out / "result.json").read_text())
    assert document["mask_files"] == ["masks/01.png", "masks/02.png"]
    for entry, file_name in zip(document["masks"], document["mask_files"], strict=True):
        mask = np.array(Image.open(out / file_name))
        assert mask.dtype == np.uint8 and set(np.unique(mask).tolist()) <= {0, 255}
        assert np.array_equal(mask > 0, decode_rle(entry["rle"]))
        (polygon,) = entry["polygons"]
        xs, ys = polygon[0::2], polygon[1::2]
        x0, y0, x1, y1 = entry["box_xyxy"]
        assert (min(xs), min(ys)) == (x0, y0) and (max(xs) + 1, max(ys) + 1) == (x1, y1)
    overlay = np.array(Image.open(out / "overlay.png"))
    image = np.array(Image.open(photo))
    # The legend darkens the top-left corner; the rest of the image is the plain overlay.
    assert overlay[2:10, 2:10].mean() < image[2:10, 2:10].mean()


def test_without_export_there_are_no_mask_files(
    photo: Path, tmp_path: Path, backends: dict[str, object]
) -> None:
    out = tmp_path / "o"
    _ok_run(backends["chat"])
    assert runner.invoke(app, ["run", str(photo), "cat", "--out", str(out)]).exit_code == 0
    document = json.loads((out / "result.json").read_text())
    assert not (out / "masks").exists() and "mask_files" not in document
    assert "polygons" not in document["masks"][0]
    # The run itself writes the overlay with its legend; no export rewrites it.
    overlay = np.array(Image.open(out / "overlay.png"))
    image = np.array(Image.open(photo))
    assert overlay[2:10, 2:10].mean() < image[2:10, 2:10].mean()


def test_the_default_mllm_note_names_flags(
    photo: Path, tmp_path: Path, backends: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's note names settings as the library does; ``run`` shows them as flags."""
    note = "MLLM: m in float32, in this process (fits); choose another with `llm='hf:ID'`"
    monkeypatch.setattr(BackendSpec, "plan", lambda self, **kwargs: ModelPlan(self, note))
    chat = backends["chat"]
    assert isinstance(chat, ScriptedChatModel)
    chat.replies = [tool("report_no_mask")]
    result = runner.invoke(app, ["run", str(photo), "x", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        "MLLM: m in float32, in this process (fits); choose another with --llm hf:ID"
    )
