"""hub_access: a hub id without network fails in one line at once, or loads from the
cache; local directories and HF_HUB_OFFLINE are never probed. locate/check_located: where
every model of a run is, and all missing ones named at once. The probe is always faked and
the hub is a fake or a server on 127.0.0.1: no test touches the network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sam3_agent.backends import hub
from sam3_agent.backends.hf_chat import TransformersChatModel
from sam3_agent.backends.hub import HfHub as RealHfHub  # before the autouse fake replaces it
from sam3_agent.values.errors import WeightsUnavailableError
from tests.support.fake_hub import FakeHub
from tests.support.hub_server import COMMIT, hub_server


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
        hub.hub_access("org/model", what="SAM 3", setting="`sam3='DIR'`", probe=unreachable)
    message = str(caught.value)
    assert "\n" not in message
    for expected in ("https://huggingface.co", "HF_HUB_OFFLINE=1", "`sam3='DIR'`", "org/model"):
        assert expected in message
    assert "licence" not in message


def test_unreachable_but_cached_loads_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: repo_id == "org/model")
    assert hub.hub_access("org/model", what="SAM 3", setting="`sam3='DIR'`", probe=unreachable)


def test_reachable_hub_downloads_normally() -> None:
    assert not hub.hub_access("org/model", what="SAM 3", setting="`sam3='DIR'`", probe=reachable)


def test_local_directory_and_offline_mode_are_not_probed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not hub.hub_access(str(tmp_path), what="x", setting="f", probe=must_not_probe)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.hub_access("org/model", what="x", setting="f", probe=must_not_probe)


def test_the_probe_uses_hf_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9/")
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: True)
    hub.hub_access("org/model", what="x", setting="f", probe=lambda e, t: asked.append(e) or False)
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
    with pytest.raises(WeightsUnavailableError, match="`sam3='DIR'`"):
        Sam3Segmenter.from_pretrained("sam3-agent-tests/no-such-sam3", device="cpu")


# -- every model of a run, before any loads (issue 17) ------------------------------------


def _cache_entry(cache: Path, repo_id: str, *files: str) -> None:
    """``files`` of ``repo_id`` in a hub cache laid out as huggingface_hub lays it out."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    for name in files:
        (repo / "snapshots" / COMMIT).mkdir(parents=True, exist_ok=True)
        (repo / "snapshots" / COMMIT / name).write_text("{}")


def test_a_cached_config_json_alone_is_not_a_cached_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config.json fetched for an estimate must not make an offline run trust the cache."""
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    _cache_entry(tmp_path, "org/estimated-only", "config.json")
    _cache_entry(tmp_path, "org/downloaded", "config.json", "model.safetensors")
    _cache_entry(tmp_path, "org/sharded", "config.json", "model.safetensors.index.json")
    assert not hub.is_cached("org/estimated-only")
    assert hub.is_cached("org/downloaded") and hub.is_cached("org/sharded")


def test_hf_hub_fetches_config_json_alone_and_names_each_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repos = {"org/tiny": {"model_type": "qwen2_5_vl"}, "org/gated": "gated"}
    with hub_server(repos) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        real = RealHfHub(cache_dir=tmp_path)
        assert real.reachable() and real.endpoint == server.url
        assert json.loads(real.fetch_config("org/tiny").read_text()) == repos["org/tiny"]
        with pytest.raises(hub.ModelMissing, match="gated on the hub: accept its licence on "):
            real.fetch_config("org/gated")
        with pytest.raises(hub.ModelMissing, match="no such model on the hub at http://127"):
            real.fetch_config("org/typo")
    assert server.paths and all(p.endswith("/resolve/main/config.json") for p in server.paths)


def test_hf_hub_asks_whether_the_hub_answers_once(monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[str] = []
    real = RealHfHub(probe=lambda endpoint, timeout_s: probes.append(endpoint) or False)
    assert not real.reachable() and not real.reachable()
    assert probes == ["https://huggingface.co"]


def _ref(source: str) -> hub.ModelRef:
    return hub.ModelRef(source, "the MLLM", "`llm='hf:DIR'`")


def test_locate_finds_directories_cache_and_hub_models(
    tmp_path: Path, tiny_qwen_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty, no_weights = tmp_path / "empty", tmp_path / "no-weights"
    empty.mkdir()
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: repo_id == "org/cached")
    fake = FakeHub(tmp_path / "hub", {"org/on-hub": {"model_type": "x"}})
    sources = [str(tiny_qwen_dir), str(empty), str(no_weights), "./nowhere", "not an id!"]
    sources += ["org/on-hub", "org/typo"]
    found = {f.model.source: f for f in (hub.locate(_ref(s), fake) for s in sources)}
    assert found[str(tiny_qwen_dir)].missing is None
    assert found[str(tiny_qwen_dir)].config == tiny_qwen_dir / "config.json"
    assert found[str(empty)].missing == f"no config.json in {empty}"
    assert found[str(no_weights)].missing == f"no weight files (*.safetensors) in {no_weights}"
    assert found["./nowhere"].missing is not None and "no directory" in found["./nowhere"].missing
    assert "neither a local directory nor a hub id" in str(found["not an id!"].missing)
    on_hub = found["org/on-hub"]
    assert on_hub.missing is None and on_hub.config is not None
    assert json.loads(on_hub.config.read_text()) == {"model_type": "x"}
    assert "no such model" in str(found["org/typo"].missing)
    assert fake.asked == ["org/on-hub", "org/typo"]  # never a local directory
    assert fake.probes == 2


def test_locate_offline_or_unreachable_names_the_way_out_and_asks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub, "is_cached", lambda repo_id: False)
    down = FakeHub(tmp_path, reachable=False)
    unreachable_model = hub.locate(_ref("Qwen/Qwen3-VL-2B-Instruct"), down)
    assert unreachable_model.missing is not None
    assert unreachable_model.missing.startswith("cannot reach the Hugging Face hub at")
    assert "`hf download Qwen/Qwen3-VL-2B-Instruct`" in unreachable_model.missing
    assert "`llm='hf:DIR'`" in unreachable_model.missing and down.asked == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    up = FakeHub(tmp_path)
    offline_model = hub.locate(_ref("Qwen/Qwen3-VL-2B-Instruct"), up)
    assert str(offline_model.missing).startswith("HF_HUB_OFFLINE is set and it is not in")
    assert up.asked == [] and up.probes == 0


def test_check_located_names_every_missing_model_in_one_line(tmp_path: Path) -> None:
    sam3 = hub.Located(hub.ModelRef("org/sam", "SAM 3", "`sam3='DIR'`"), missing="gone")
    mllm = hub.Located(_ref("org/vlm"), missing="gated on the hub")
    fine = hub.Located(_ref(str(tmp_path)), tmp_path / "config.json")
    hub.check_located([fine])
    with pytest.raises(WeightsUnavailableError) as one:
        hub.check_located([fine, mllm])
    assert str(one.value) == (
        "cannot load the MLLM 'org/vlm' (no model was loaded): gated on the hub"
    )
    with pytest.raises(WeightsUnavailableError) as both:
        hub.check_located([sam3, fine, mllm])
    message = str(both.value)
    assert "\n" not in message
    assert message == (
        "cannot load 2 models of this run (none was loaded): 1) SAM 3 'org/sam': gone. "
        "2) the MLLM 'org/vlm': gated on the hub."
    )
