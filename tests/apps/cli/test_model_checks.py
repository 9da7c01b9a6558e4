"""Every model of a run is checked before any loads (the README's promise): a model too
big for the machine is refused from its config.json alone, and every missing model is named
in one line, with no ``from_pretrained`` called at all. The hub is a fake (no network)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from sam3_agent.apps.cli.main import app
from sam3_agent.backends import hub, memory
from tests.support.fake_hub import QWEN25_VL_72B_CONFIG, FakeHub

runner = CliRunner()
QWEN_72B = "Qwen/Qwen2.5-VL-72B-Instruct"


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "photo.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(path)
    return path


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every ``from_pretrained`` of a model or processor class, recorded and refused."""
    import transformers

    called: list[str] = []

    def refusing(name: str) -> Any:
        def from_pretrained(*args: Any, **kwargs: Any) -> Any:
            called.append(name)
            raise AssertionError(f"{name}.from_pretrained ran before every model was checked")

        return classmethod(lambda cls, *a, **k: from_pretrained(*a, **k))

    for name in ("Sam3Model", "Sam3Processor", "AutoModelForImageTextToText", "AutoProcessor"):
        monkeypatch.setattr(getattr(transformers, name), "from_pretrained", refusing(name))
    monkeypatch.setattr(
        memory, "read_memory", lambda device: memory.MemoryReading("cpu", 64 * 10**9, 10**11)
    )
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield called


def use_hub(monkeypatch: pytest.MonkeyPatch, fake: FakeHub) -> FakeHub:
    monkeypatch.setattr(hub, "HfHub", lambda **kwargs: fake)
    return fake


def run(photo: Path, tmp_path: Path, *flags: str) -> Any:
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(photo), "the cat", "--out", str(out), *flags])
    assert not out.exists()  # refused before anything is written
    return result


def test_a_model_missing_from_the_table_is_estimated_from_config_json_before_any_load(
    photo: Path, tmp_path: Path, tiny_sam3_dir: Path, loads: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The issue's example: SAM 3 loaded, processor files fetched, 145 GB would follow."""
    fake = use_hub(monkeypatch, FakeHub(tmp_path / "hub", {QWEN_72B: QWEN25_VL_72B_CONFIG}))
    result = run(
        photo, tmp_path, "--sam3", str(tiny_sam3_dir), "--llm", f"hf:{QWEN_72B}",
        "--device", "cpu", "--dtype", "bfloat16",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: not enough memory on cpu: need ≈")
    assert f"{QWEN_72B} ≈177.3 GB in bfloat16" in line  # 73.4 B parameters
    assert "64.0 GB of 100.0 GB available" in line
    assert fake.asked == [QWEN_72B] and loads == []


def test_one_missing_model_means_no_model_loads(
    photo: Path, tmp_path: Path, tiny_sam3_dir: Path, loads: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """SAM 3 is here, the MLLM is not on the hub: SAM 3 must not load first."""
    use_hub(monkeypatch, FakeHub(tmp_path / "hub"))
    result = run(
        photo, tmp_path, "--sam3", str(tiny_sam3_dir), "--llm", "hf:sam3-agent-tests/no-vlm",
        "--device", "cpu",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        "error: WeightsUnavailableError: cannot load the MLLM 'sam3-agent-tests/no-vlm' (no "
        "model was loaded): no such model on the hub at https://hub.test (fake)\n"
    )
    assert loads == []


def test_every_missing_model_is_named_at_once(
    photo: Path, tmp_path: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_hub(monkeypatch, FakeHub(tmp_path / "hub"))
    missing_dir = tmp_path / "no-sam3-here"
    result = run(
        photo, tmp_path, "--sam3", str(missing_dir), "--llm", "hf:sam3-agent-tests/no-vlm",
        "--device", "cpu",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: WeightsUnavailableError: cannot load 2 models of this run")
    assert f"1) SAM 3 '{missing_dir}': no directory {missing_dir}." in line
    assert "2) the MLLM 'sam3-agent-tests/no-vlm': no such model on the hub" in line
    assert loads == []


@pytest.mark.parametrize("why", ["HF_HUB_OFFLINE", "no network"])
def test_offline_names_every_model_not_in_the_cache(
    why: str, photo: Path, tmp_path: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = use_hub(monkeypatch, FakeHub(tmp_path / "hub", reachable=why != "no network"))
    if why == "HF_HUB_OFFLINE":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run(
        photo, tmp_path, "--sam3", "sam3-agent-tests/sam3-not-cached",
        "--llm", "hf:sam3-agent-tests/vlm-not-cached", "--device", "cpu", "--dtype", "bfloat16",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "cannot load 2 models of this run (none was loaded)" in line
    said = "HF_HUB_OFFLINE is set" if why == "HF_HUB_OFFLINE" else "cannot reach the Hugging Face"
    assert line.count(said) == 2
    assert "`hf download sam3-agent-tests/sam3-not-cached`" in line and "--sam3 DIR" in line
    assert "`hf download sam3-agent-tests/vlm-not-cached`" in line and "--llm hf:DIR" in line
    assert fake.asked == [] and loads == []


@pytest.mark.parametrize(
    ("flags", "what"),
    [
        (["--sam3", "models/sam3-typo", "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m"],
         "SAM 3 'models/sam3-typo'"),
        (["--sam3", "models/sam3", "--llm", "hf:models/vlm-typo"], "the MLLM 'models/vlm-typo'"),
    ],
)  # fmt: skip
def test_a_mistyped_local_directory_is_named_as_one_not_as_a_hub_id(
    photo: Path, tmp_path: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch,
    tiny_sam3_dir: Path, flags: list[str], what: str,
) -> None:  # fmt: skip
    """``models/x`` beside a ``models`` folder: the user meant a directory; the hub is not asked."""
    fake = use_hub(monkeypatch, FakeHub(tmp_path / "hub"))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "sam3").symlink_to(tiny_sam3_dir)
    monkeypatch.chdir(tmp_path)
    result = run(photo, tmp_path, *flags, "--device", "cpu")
    assert result.exit_code == 1, result.output
    typo = what.split("'")[1]
    assert result.stderr == (
        f"error: WeightsUnavailableError: cannot load {what} (no model was loaded): neither a "
        f"local directory (there is no {typo}) nor a hub model in the local cache; check the "
        f"path, or fetch the hub model first (`hf download {typo}`)\n"
    )
    assert fake.asked == [] and loads == []


def test_the_default_mllm_chosen_is_said_also_when_it_cannot_load(
    photo: Path, tmp_path: Path, tiny_sam3_dir: Path, loads: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    use_hub(monkeypatch, FakeHub(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the default MLLM is not in the cache
    result = run(photo, tmp_path, "--sam3", str(tiny_sam3_dir), "--device", "cpu")
    assert result.exit_code == 1, result.output
    chosen, error = result.stderr.strip().splitlines()
    assert chosen.startswith("MLLM: ") and "in this process (" in chosen
    assert chosen.endswith("choose another with --llm hf:ID or --llm-url")
    model = chosen.removeprefix("MLLM: ").split(" ")[0]
    assert error.startswith("error: WeightsUnavailableError: cannot load the MLLM")
    assert f"'{model}'" in error and loads == []
