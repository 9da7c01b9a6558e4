"""What the SAM 3 backends share: one loading path for the image and the video model, one
construction for the two service clients."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from sam3_agent.backends import sam3_common, service_client
from sam3_agent.backends.retry import RetryPolicy
from sam3_agent.backends.sam3_local import Sam3Segmenter
from sam3_agent.backends.sam3_remote import RemoteSegmenter, RemoteVideoSegmenter
from sam3_agent.backends.sam3_video import Sam3VideoSegmenter
from sam3_agent.values.errors import UserError, WeightsUnavailableError


@pytest.mark.parametrize(
    ("segmenter", "model_class", "processor_class"),
    [
        (Sam3Segmenter, "Sam3Model", "Sam3Processor"),
        (Sam3VideoSegmenter, "Sam3VideoModel", "Sam3VideoProcessor"),
    ],
)
def test_both_models_load_through_load_sam3(
    monkeypatch: pytest.MonkeyPatch,
    segmenter: Any,
    model_class: str,
    processor_class: str,
) -> None:
    asked: list[tuple[str, str, str, str, str]] = []

    def refuse(model: Any, mc: type, pc: type, *, device: str, dtype: str) -> Any:
        asked.append((str(model), mc.__name__, pc.__name__, device, dtype))
        raise WeightsUnavailableError("refused by the test")

    monkeypatch.setattr(sam3_common, "load_sam3", refuse)
    with pytest.raises(WeightsUnavailableError, match="refused by the test"):
        segmenter.from_pretrained(Path("some/dir"), device="cpu", dtype="float32")
    assert asked == [("some/dir", model_class, processor_class, "cpu", "float32")]


@pytest.mark.parametrize(
    ("segmenter", "options", "message"),
    [
        (Sam3Segmenter, {"cache_size": -1}, "cache_size must be >= 0, got -1"),
        (Sam3Segmenter, {"max_phrase_batch": 0}, "max_phrase_batch must be >= 1, got 0"),
        (Sam3VideoSegmenter, {"feature_cache_bytes": -1}, "`feature_cache_bytes` must be >= 0"),
    ],
)
def test_both_models_refuse_bad_options_before_loading_weights(
    monkeypatch: pytest.MonkeyPatch, segmenter: Any, options: dict[str, int], message: str
) -> None:
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("weights were loaded before the options were checked")

    monkeypatch.setattr(sam3_common, "load_sam3", never)
    with pytest.raises(UserError, match=message):
        segmenter.from_pretrained(Path("some/dir"), device="cpu", dtype="float32", **options)


@pytest.mark.parametrize(
    ("client", "timeout_s"), [(RemoteSegmenter, 120.0), (RemoteVideoSegmenter, 1800.0)]
)
def test_both_service_clients_build_their_connection_in_one_place(
    monkeypatch: pytest.MonkeyPatch, client: Any, timeout_s: float
) -> None:
    built: list[dict[str, Any]] = []
    real = service_client.httpx.Client

    def record(**kwargs: Any) -> httpx.Client:
        built.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(service_client.httpx, "Client", record)
    with client("http://gpu-box:8100/", "tok", retries=1) as backend:
        assert isinstance(backend, service_client.ServiceBackend)
        assert backend.url == "http://gpu-box:8100"
        assert backend.describe() == service_client.sam3_description(url="http://gpu-box:8100/")
        assert backend._retry == RetryPolicy(
            max_retries=1,
            backoff_base_s=0.5,
            backoff_cap_s=math.inf,
            max_retry_after_s=60.0,
            jitter=False,
        )
    assert built == [
        {
            "base_url": "http://gpu-box:8100",
            "headers": {"Authorization": "Bearer tok"},
            "timeout": timeout_s,
            "transport": None,
        }
    ]


def test_phrase_readings_keep_the_most_recent_and_default_to_the_phrase() -> None:
    handle = service_client.RemoteHandle(cast(Any, None))
    assert handle.used_phrase("a dog") == "a dog"
    handle._remember("a dog", "a dog", "a do")
    assert handle.used_phrase("a dog") == "a do"
    handle._remember("a cat", "a cat", None)  # not reported: as sent
    assert handle.used_phrase("a cat") == "a cat"
    for n in range(service_client._KNOWN_PHRASES):
        handle._remember(f"p{n}", f"p{n}", f"q{n}")
    assert handle.used_phrase("a dog") == "a dog"  # evicted, least recently remembered
    assert handle.used_phrase("p0") == "q0"
