"""``sam3-agent batch`` on the local engine: tiny SAM 3 from disk, the test MLLM server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.runs.batch.results import RequestResult
from sam3_agent.runs.jobs.store import reading
from tests.support.batch_fixtures import QUERIES, respond, write_images, write_jsonl
from tests.support.openai_server import Reply, ScriptedServer, serve

runner = CliRunner()


@pytest.fixture
def mllm() -> Iterator[ScriptedServer]:
    with serve(ScriptedServer(responder=respond)) as server:
        yield server


@pytest.fixture
def flags(tiny_sam3_dir: Path, mllm: ScriptedServer, hf_offline: None) -> list[str]:
    return [
        "--sam3", str(tiny_sam3_dir), "--device", "cpu", "--llm-url", mllm.base_url,
        "--llm-model", "test-vlm", "--llm-api-key", "k", "--score-threshold", "0.0",
    ]  # fmt: skip


def _batch(*args: str) -> Any:
    return runner.invoke(app, ["batch", "--no-progress", *args])


def _summary(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]


def test_batch_writes_each_request_and_a_summary(
    tmp_path: Path, flags: list[str], mllm: ScriptedServer
) -> None:
    source = write_jsonl(tmp_path / "in")
    out = tmp_path / "out"
    result = _batch(str(source), "--out", str(out), *flags)
    assert result.exit_code == 0, result.output
    assert "6 run, 0 already stored, 0 failed" in result.stderr
    assert re.search(r"failed in \d+\.\d s \(\d+\.\d\d requests/s\)", result.stderr)  # wall time
    assert "requests" in result.stdout and "summary.jsonl" in result.stdout
    rows = _summary(out)
    assert [r["id"] for r in rows] == [
        f"{i}:{q}" for i in ("one.png", "two.png", "three.png") for q in QUERIES
    ]
    for row in rows:
        assert row["status"] == "masks" and row["masks"] == 1 and row["rounds"] == 2
        files = out / row["outputs"]
        for name in ("result.json", "overlay.png", "trace.jsonl"):
            assert (files / name).is_file(), (row["id"], name)
        doc = json.loads((files / "result.json").read_text())
        assert doc["query"] == row["query"] and len(doc["masks"]) == 1
    assert len(mllm.completions) == 12  # two calls per request

    again = _batch(str(source), "--out", str(out), *flags, "--concurrency", "2")
    assert again.exit_code == 0, again.output
    assert "0 run, 6 already stored, 0 failed" in again.stderr
    assert "(- requests/s)" in again.stderr  # nothing ran: no rate
    assert len(mllm.completions) == 12  # nothing asked twice
    assert _summary(out) == rows


def test_failed_requests_are_kept_and_retried_on_demand(
    tmp_path: Path, flags: list[str], mllm: ScriptedServer
) -> None:
    def refuse_blue(body: dict[str, Any]) -> Reply:
        # 400 is not retried: the request fails at once as an infrastructure failure.
        return Reply.server_error(400) if "blue stripe" in json.dumps(body) else respond(body)

    mllm.responder = refuse_blue
    source = write_jsonl(tmp_path / "in")
    out = tmp_path / "out"
    first = _batch(str(source), "--out", str(out), *flags)
    assert first.exit_code == 0, first.output
    assert "6 run, 0 already stored, 3 failed" in first.stderr
    failed = [r for r in _summary(out) if r["status"] == "failed"]
    assert {r["query"] for r in failed} == {"blue stripe"}
    assert all("ChatModelError" in r["failure"] for r in failed)

    mllm.responder = respond
    plain = _batch(str(source), "--out", str(out), *flags)
    assert "0 run, 6 already stored" in plain.stderr
    retried = _batch(str(source), "--out", str(out), *flags, "--retry-failed")
    assert retried.exit_code == 0, retried.output
    assert "3 run, 3 already stored, 0 failed" in retried.stderr
    assert {r["status"] for r in _summary(out)} == {"masks"}
    with reading(out, RequestResult.from_json) as store:
        assert store.count() == 6


def test_folder_input_with_one_query(tmp_path: Path, flags: list[str]) -> None:
    write_images(tmp_path / "img")
    out = tmp_path / "out"
    result = _batch(str(tmp_path / "img"), "--query", "red block", "--out", str(out), *flags)
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in _summary(out)] == ["one.png", "three.png", "two.png"]


def test_a_dead_llm_url_is_failed_over(tmp_path: Path, flags: list[str]) -> None:
    with serve() as dead:
        dead_url = dead.base_url
    # The server is gone: its port refuses connections. Every call must reach the live one.
    source = write_jsonl(tmp_path / "in")
    result = _batch(str(source), "--out", str(tmp_path / "out"), "--llm-url", dead_url, *flags)
    assert result.exit_code == 0, result.output
    assert "6 run, 0 already stored, 0 failed" in result.stderr


def test_usage_errors_are_one_line_before_any_model_loads(tmp_path: Path) -> None:
    write_images(tmp_path / "img")
    source = write_jsonl(tmp_path / "in")
    out = str(tmp_path / "out")
    cases = [
        ([str(tmp_path / "img"), "--out", out], "give the query with --query"),
        ([str(source), "--out", out, "--workers", "2"], "--workers applies to --engine ray"),
        ([str(source), "--out", out, "--ray-address", "auto"], "--ray-address applies"),
        ([str(source), "--out", out, "--engine", "ray"],
         "--engine ray loads the MLLM on the workers only"),
        ([str(source), "--out", out, "--llm-url", "http://127.0.0.1:9/v1"],
         "--llm-model is required"),
        ([str(source), "--out", out, "--temperature", "-1"], "--temperature"),
        ([str(source), "--out", out, "--prompts", str(tmp_path / "no-prompts")], "is not a directory"),
        ([str(tmp_path / "nope.jsonl"), "--out", out], "does not exist"),
    ]  # fmt: skip
    for args, message in cases:
        result = _batch(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_run_directory_refuses_other_settings(tmp_path: Path, flags: list[str]) -> None:
    source = write_jsonl(tmp_path / "in")
    out = tmp_path / "out"
    assert _batch(str(source), "--out", str(out), *flags).exit_code == 0
    refused = _batch(str(source), "--out", str(out), *flags, "--max-rounds", "3")
    assert refused.exit_code == 2
    # One line naming the setting that differs, not the two whole settings it belongs to.
    assert refused.stderr == (
        f"error: {out} holds a run made with different settings (agent.max_rounds was 100, "
        "now 3); use the same settings to resume, or another --out directory\n"
    )
    refused = _batch(str(source), "--out", str(out), *flags, "--temperature", "0.5")
    assert refused.exit_code == 2
    assert "(generation.temperature was not given, now 0.5)" in refused.stderr
    resumed = _batch(str(source), "--out", str(out), *flags, "--check-concurrency", "1")
    assert resumed.exit_code == 0 and "0 run, 6 already stored" in resumed.stderr


def test_stored_settings_name_the_prompt_set(tmp_path: Path, flags: list[str]) -> None:
    source = write_jsonl(tmp_path / "in")
    out = tmp_path / "out"
    assert _batch(str(source), "--out", str(out), *flags).exit_code == 0
    with reading(out, RequestResult.from_json) as store:
        config = store.config()
    assert config is not None
    agent = config["agent"]
    assert set(agent["prompts"]) == {"name", "version"} and "prompts_dir" not in agent


def test_a_url_on_two_rows_is_fetched_once_and_a_dead_one_fails_its_row(
    tmp_path: Path, flags: list[str]
) -> None:
    import hashlib

    from tests.support.media_server import Route, media_server

    image = write_images(tmp_path / "images")[0]
    data = image.read_bytes()
    with media_server() as server:
        server.routes["/one.png"] = Route(data)
        url, dead = server.url("/one.png"), server.url("/gone.png")
        rows = [{"image": url, "query": q} for q in QUERIES] + [{"image": dead, "query": "x"}]
        source = tmp_path / "requests.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / "out"
        result = _batch(str(source), "--out", str(out), *flags)
        assert server.hits("/one.png") == 1 and server.hits("/gone.png") == 1
    assert result.exit_code == 0, result.output
    assert "3 run, 0 already stored, 1 failed" in result.stderr
    by_id = {r["id"]: r for r in _summary(out)}
    failed = by_id[f"{dead}:x"]
    assert failed["status"] == "failed" and "HTTP 404" in failed["failure"]
    for query in QUERIES:
        row = by_id[f"{url}:{query}"]
        assert row["status"] == "masks"
        doc = json.loads((out / row["outputs"] / "result.json").read_text())
        assert doc["image"]["url"] == url and doc["image"]["path"] == url
        assert doc["image"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_row_with_another_scheme_is_refused_naming_its_line(
    tmp_path: Path, flags: list[str]
) -> None:
    source = tmp_path / "requests.jsonl"
    source.write_text(json.dumps({"image": "s3://bucket/a.png", "query": "x"}) + "\n")
    result = _batch(str(source), "--out", str(tmp_path / "out"), *flags)
    assert result.exit_code == 2, result.output
    assert f"{source}:1: s3://bucket/a.png: only http:// and https://" in result.stderr
    assert not (tmp_path / "out").exists()
