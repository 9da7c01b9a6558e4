"""A backend describes itself as its options say it will, before it is built.

A resumed session is checked against ``BackendSpec.describe()`` before any model loads and
against the built backends' own ``describe()`` after: the two must agree for every kind of
backend, or one of the checks would refuse a session the other accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sam3_agent.backends.base import describe_backend
from sam3_agent.backends.spec import BackendSpec

ENDPOINTS: list[dict[str, Any]] = [
    {},
    {"temperature": 0.7, "max_tokens": 99, "seed": 3, "llm_extra": '{"b": 1, "a": {"c": 2}}'},
    {"llm_url": ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1/"]},  # failover
    {"temperature": 0.0, "llm_extra": "{}"},
]


@pytest.fixture(autouse=True)
def no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def built(spec: BackendSpec, *, chat: bool = True) -> dict[str, Any]:
    parts = {"sam3": describe_backend(spec.build_segmenter())}
    if chat:
        parts["mllm"] = describe_backend(spec.build_chat_model())
    return parts


@pytest.mark.parametrize("options", ENDPOINTS)
def test_an_endpoint_and_a_service_describe_themselves_as_the_spec_says(
    options: dict[str, Any],
) -> None:
    options = {"llm_url": "http://127.0.0.1:9/v1", **options}
    spec = BackendSpec(
        sam3_url="http://127.0.0.1:8100/", llm_model="Qwen/Qwen3-VL-8B-Instruct", **options
    )
    described = spec.describe()
    assert built(spec) == described
    assert described["sam3"] == {"--sam3": None, "--sam3-url": "http://127.0.0.1:8100"}
    assert described["mllm"]["--llm-model"] == "Qwen/Qwen3-VL-8B-Instruct"


def test_the_response_cache_describes_the_model_behind_it(tmp_path: Path) -> None:
    spec = BackendSpec(
        sam3_url="http://127.0.0.1:8100",
        llm_url="http://127.0.0.1:9/v1",
        llm_model="m",
        cache=tmp_path / "responses.sqlite",
        seed=5,
    )
    assert built(spec) == spec.describe()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "auto"])
def test_in_process_models_describe_themselves_as_the_spec_says(
    tiny_sam3_dir: Path, tiny_qwen_dir: Path, hf_offline: None, dtype: str
) -> None:
    spec = BackendSpec(
        sam3=str(tiny_sam3_dir),
        llm=f"hf:{tiny_qwen_dir}",
        device="cpu",
        dtype=dtype,
        temperature=0.3,
        seed=1,
        llm_extra='{"chat_template_kwargs": {"enable_thinking": false}}',
        memory_check=False,
    )
    described = spec.describe()
    assert built(spec) == described
    assert described["mllm"]["--llm"] == f"hf:{tiny_qwen_dir}"
    assert described["sam3"]["--dtype"] in {"float32", "bfloat16"}
    # Unresolved, only what needs the machine is missing: the rest is already known.
    early = spec.describe(resolve=False)
    for part, description in early.items():
        assert description.items() <= described[part].items()
    if dtype == "auto":
        assert "--dtype" not in early["sam3"] and "--dtype" not in early["mllm"]


def test_the_default_mllm_is_named_once_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    from sam3_agent.backends import memory

    reading = memory.MemoryReading("cpu", 10**12, 10**12)
    spec = BackendSpec(sam3_url="http://127.0.0.1:8100", device="cpu", dtype="bfloat16")
    unplanned = spec.describe(resolve=False)["mllm"]
    assert "--llm" not in unplanned and "--llm-model" not in unplanned
    planned = spec.plan(reading=reading).spec.describe()["mllm"]
    assert planned["--llm"].startswith("hf:Qwen/") and planned.items() >= unplanned.items()


def test_sam3_alone_has_no_mllm_part() -> None:
    spec = BackendSpec(sam3_url="http://127.0.0.1:8100", llm_model="ignored")
    assert spec.describe(chat=False) == built(spec, chat=False)
    assert "mllm" not in spec.describe(chat=False)


def test_a_backend_that_does_not_describe_itself_is_undescribed() -> None:
    class Plain:
        name = "m"

    class Odd:
        def describe(self) -> object:
            return ["not", "a", "mapping"]

    assert describe_backend(Plain()) is None
    assert describe_backend(Odd()) is None
