"""hub_access: a hub id without network fails in one line at once, or loads from the
cache; local directories and HF_HUB_OFFLINE are never probed. The probe is always faked
here: no test touches the network."""

from __future__ import annotations

from pathlib import Path

import pytest

from sam3_agent.backends import hub
from sam3_agent.backends.hf_chat import TransformersChatModel
from sam3_agent.values.errors import WeightsUnavailableError


def unreachable(endpoint: str, timeout_s: float) -> bool:
    return False


def reachable(endpoint: str, timeout_s: float) -> bool:
    return True


def must_not_probe(endpoint: str, timeout_s: float) -> bool:
    raise AssertionError("no probe expected")


@pytest.fixture(autouse=True)
def online_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)


def test_unreachable_and_not_cached_is_one_line_with_the_ways_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: False)
    with pytest.raises(WeightsUnavailableError) as caught:
        hub.hub_access("org/model", what="SAM 3", flag="--sam3 DIR", probe=unreachable)
    message = str(caught.value)
    assert "\n" not in message
    for expected in ("https://huggingface.co", "HF_HUB_OFFLINE=1", "--sam3 DIR", "org/model"):
        assert expected in message
    assert "licence" not in message


def test_unreachable_but_cached_loads_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: repo_id == "org/model")
    assert hub.hub_access("org/model", what="SAM 3", flag="--sam3 DIR", probe=unreachable)


def test_reachable_hub_downloads_normally() -> None:
    assert not hub.hub_access("org/model", what="SAM 3", flag="--sam3 DIR", probe=reachable)


def test_local_directory_and_offline_mode_are_not_probed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not hub.hub_access(str(tmp_path), what="x", flag="f", probe=must_not_probe)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.hub_access("org/model", what="x", flag="f", probe=must_not_probe)


def test_the_probe_uses_hf_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9/")
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: True)
    hub.hub_access("org/model", what="x", flag="f", probe=lambda e, t: asked.append(e) or False)
    assert asked == ["http://127.0.0.1:9"]


def test_can_connect_answers_false_for_a_closed_local_port() -> None:
    # 127.0.0.1 only: port 9 (discard) is closed on test machines; no outside address.
    assert hub.can_connect("http://127.0.0.1:9", 1.0) is False
    assert hub.can_connect("not a url", 1.0) is False


def test_the_mllm_loader_fails_fast_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "can_connect", unreachable)
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: False)
    with pytest.raises(WeightsUnavailableError, match="cannot reach the Hugging Face hub"):
        TransformersChatModel.from_pretrained("sam3-agent-tests/no-such-model", device="cpu")


def test_the_sam3_loader_fails_fast_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    from sam3_agent.backends.sam3_local import Sam3Segmenter

    monkeypatch.setattr(hub, "can_connect", unreachable)
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: False)
    with pytest.raises(WeightsUnavailableError, match="--sam3 DIR"):
        Sam3Segmenter.from_pretrained("sam3-agent-tests/no-such-sam3", device="cpu")
