"""Memory estimates and the default MLLM, before any weight is downloaded: tiny models'
configs, the known-models table, and faked memory readings (no test depends on this
machine's memory or touches the network: the hub is tests/support/fake_hub.py's)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.backends import memory
from sam3_agent.backends.memory import (
    GB,
    GPU_DEFAULT_MLLM,
    KNOWN_PARAMETERS,
    KNOWN_VIDEO_PARAMETERS,
    SMALL_DEFAULT_MLLMS,
    Footprint,
    MemoryReading,
)
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.errors import UserError
from tests.support.fake_hub import FakeHub


def reading(gb: float, device: str = "cpu") -> MemoryReading:
    return MemoryReading(device, int(gb * GB), int(max(gb, 24) * GB))


def test_parameters_come_from_config_json(tiny_qwen_dir: Path, tiny_sam3_dir: Path) -> None:
    from transformers import AutoModelForImageTextToText, Sam3Model

    qwen = memory.footprint(str(tiny_qwen_dir), "mllm", "float32")
    sam3 = memory.footprint(str(tiny_sam3_dir), "sam3", "bfloat16")
    assert qwen is not None and sam3 is not None
    assert qwen.source == sam3.source == "config.json"
    real_qwen = AutoModelForImageTextToText.from_pretrained(tiny_qwen_dir)
    real_sam3 = Sam3Model.from_pretrained(tiny_sam3_dir)
    assert qwen.parameters == sum(p.numel() for p in real_qwen.parameters())
    assert sam3.parameters == sum(p.numel() for p in real_sam3.parameters())
    assert qwen.weights == 4 * qwen.parameters and sam3.weights == 2 * sam3.parameters


def test_uncached_hub_ids_use_the_known_table_and_unknown_ones_are_not_estimated() -> None:
    known = memory.footprint("Qwen/Qwen3-VL-2B-Instruct", "mllm", "bfloat16")
    assert known is not None and known.source == "known models table"
    assert known.parameters == KNOWN_PARAMETERS["Qwen/Qwen3-VL-2B-Instruct"]
    assert memory.footprint("sam3-agent-tests/unknown-model", "mllm", "bfloat16") is None


@given(parameters=st.integers(1, 10**11), dtype=st.sampled_from(["float32", "bfloat16"]))
def test_need_is_weights_plus_the_documented_margins(parameters: int, dtype: str) -> None:
    f = Footprint("m", parameters, dtype, "test")
    expected = parameters * memory.BYTES_PER_PARAMETER[dtype] * 1.2 + memory.MARGIN_BYTES
    assert abs(f.need - expected) <= 1
    assert f.need > f.weights


@pytest.mark.parametrize(
    ("gb", "device", "dtype", "expected"),
    [
        (80, "cuda:0", "bfloat16", GPU_DEFAULT_MLLM),
        (32, "cuda:0", "bfloat16", GPU_DEFAULT_MLLM),
        (24, "cuda:0", "bfloat16", "Qwen/Qwen3-VL-4B-Instruct"),
        (16, "cuda:0", "bfloat16", "Qwen/Qwen3-VL-4B-Instruct"),
        (1000, "cpu", "float32", "Qwen/Qwen3-VL-4B-Instruct"),
        (20, "cpu", "float32", "Qwen/Qwen3-VL-2B-Instruct"),
        (4, "cpu", "float32", "Qwen/Qwen3-VL-2B-Instruct"),
    ],
)
def test_default_mllm_follows_the_hardware(gb: float, device: str, dtype: str, expected: str):
    sam3 = Footprint("facebook/sam3", KNOWN_PARAMETERS["facebook/sam3"], dtype, "test")
    choice = memory.choose_default_mllm(reading(gb, device), dtype, [sam3])
    assert choice.model == expected
    assert "\n" not in choice.reason and f"{gb:.1f} GB" in choice.reason
    if device == "cpu":
        assert "no CUDA device" in choice.reason and expected in SMALL_DEFAULT_MLLMS


def test_check_fits_refuses_in_one_line_with_the_numbers() -> None:
    big = Footprint("big-model", 10 * 10**9, "float32", "test")
    with pytest.raises(UserError) as caught:
        memory.check_fits([big], reading(8), "ways out: --llm-url")
    message = str(caught.value)
    assert "\n" not in message
    assert (
        "need ≈49.1 GB (big-model ≈49.1 GB in float32)" in message
        and "8.0 GB of 24.0 GB" in message
    )
    assert message.endswith("ways out: --llm-url")
    memory.check_fits([big], reading(60), "unused")  # fits: no error


def test_plan_with_tiny_models_refuses_a_tiny_memory(
    tiny_qwen_dir: Path, tiny_sam3_dir: Path
) -> None:
    options = BackendSpec(sam3=str(tiny_sam3_dir), llm=f"hf:{tiny_qwen_dir}", device="cpu")
    plan = options.plan(reading=reading(8))
    assert plan.spec == options and plan.note is None
    with pytest.raises(UserError, match="not enough memory on cpu") as caught:
        options.plan(reading=MemoryReading("cpu", 10**6, 10**9))
    for way in ("`llm_url=", "`llm='hf:", "`sam3_url`", "`memory_check=False`"):
        assert way in str(caught.value)
    unchecked = replace(options, memory_check=False)
    assert unchecked.plan(reading=MemoryReading("cpu", 10**6, 10**9)).spec == unchecked


def test_plan_makes_the_default_explicit_and_says_why() -> None:
    options = BackendSpec(device="cpu", dtype="bfloat16")
    plan = options.plan(reading=reading(64))
    assert plan.spec.llm == "hf:Qwen/Qwen3-VL-4B-Instruct"
    assert plan.note is not None and "\n" not in plan.note
    assert plan.note.startswith("MLLM: Qwen/Qwen3-VL-4B-Instruct in bfloat16")
    assert "no CUDA device" in plan.note


def test_plan_counts_only_what_runs_in_this_process() -> None:
    remote = BackendSpec(
        sam3_url="http://127.0.0.1:1", llm_url="http://127.0.0.1:2/v1", llm_model="m"
    )
    assert remote.plan(reading=MemoryReading("cpu", 0, 0)).spec == remote
    sam3_only = BackendSpec(device="cpu", dtype="float32")
    with pytest.raises(UserError, match=r"facebook/sam3 ≈5\.1 GB in float32"):
        sam3_only.plan(chat=False, reading=reading(2))
    sam3_only.plan(chat=False, reading=reading(6))


def test_run_on_a_small_machine_refuses_before_loading_or_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    from PIL import Image

    def no_models(self: BackendSpec) -> object:
        raise AssertionError("nothing may load when the models do not fit")

    monkeypatch.setattr(BackendSpec, "build_segmenter", no_models)
    monkeypatch.setattr(BackendSpec, "build_chat_model", no_models)
    monkeypatch.setattr(memory, "read_memory", lambda device: reading(6))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    photo = tmp_path / "p.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(photo)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["run", str(photo), "cat", "--device", "cpu", "--dtype", "float32", "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: not enough memory on cpu: need ≈16.4 GB")
    assert "Qwen/Qwen3-VL-2B-Instruct ≈11.3 GB in float32" in line  # the default it chose
    assert "--dtype bfloat16" in line
    assert not out.exists()


def test_the_video_model_is_counted_with_its_tracker(tiny_sam3_video_dir: Path) -> None:
    from transformers import Sam3VideoModel

    video = memory.footprint(str(tiny_sam3_video_dir), "sam3_video", "float32", extra=5)
    assert video is not None and video.source == "config.json"
    real = Sam3VideoModel.from_pretrained(tiny_sam3_video_dir)
    assert video.parameters == sum(p.numel() for p in real.parameters())
    assert video.need == Footprint("v", video.parameters, "float32", "test").need + 5
    known = memory.footprint("facebook/sam3", "sam3_video", "bfloat16")
    assert known is not None and known.parameters == KNOWN_VIDEO_PARAMETERS["facebook/sam3"]
    assert known.parameters > KNOWN_PARAMETERS["facebook/sam3"]


def test_plan_for_video_counts_the_video_model_and_its_feature_cache() -> None:
    options = BackendSpec(device="cpu", dtype="float32", video_cache_mb=2048)
    options.plan(chat=False, reading=reading(6))  # the image model fits
    with pytest.raises(UserError, match=r"facebook/sam3 ≈7\.3 GB in float32"):
        options.plan(chat=False, video=True, reading=reading(6))
    replace(options, video_cache_mb=0).plan(chat=False, video=True, reading=reading(6))


def test_memory_reading_of_this_machine_is_plausible() -> None:
    ram = memory.read_memory(torch.device("cpu"))
    assert 0 < ram.available <= ram.total


def test_an_unknown_hub_model_is_estimated_from_its_config_json_alone(
    tmp_path: Path, tiny_qwen_dir: Path
) -> None:
    """Neither cached nor in the table: only config.json is fetched, and the estimate
    refuses what does not fit (it used to pass unestimated, then download everything)."""
    config = json.loads((tiny_qwen_dir / "config.json").read_text())
    hub = FakeHub(tmp_path, {"sam3-agent-tests/unknown-vlm": config})
    options = BackendSpec(
        sam3_url="http://127.0.0.1:1", llm="hf:sam3-agent-tests/unknown-vlm", device="cpu",
        dtype="float32",
    )  # fmt: skip
    with pytest.raises(UserError, match="not enough memory on cpu") as refused:
        options.plan(reading=MemoryReading("cpu", 10**6, 10**9), hub=hub)
    expected = memory.footprint(str(tiny_qwen_dir), "mllm", "float32")
    assert expected is not None
    assert f"sam3-agent-tests/unknown-vlm ≈{expected.need / GB:.1f} GB" in str(refused.value)
    assert hub.asked == ["sam3-agent-tests/unknown-vlm"]
    assert options.plan(reading=reading(64), hub=hub).spec == options  # fits: planned
