"""One rule for phrases: what the in-process backend accepts, the service accepts, and both
read the same text (issue 17: a control character failed a whole run through --sam3-url)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import cv2
import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sam3_agent.agent.tools import SegmentPhraseParams
from sam3_agent.apps.service.app import create_app
from sam3_agent.backends.sam3_remote import RemoteSegmenter
from sam3_agent.backends.schemas import SegmentRequest
from sam3_agent.backends.segment_args import (
    MAX_SEGMENT_PHRASE_CHARS,
    check_segment_args,
    clean_phrase,
)
from sam3_agent.values.errors import UserError
from tests.support.fakes import FakeSegmenter

# Every code point, surrogates and control characters included.
_any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)
_phrases = st.one_of(
    st.text(_any_char, max_size=40),
    st.text(
        st.sampled_from(" \t\n\r\x00\x01\x1b\x7f\x85\x9b\ud800\udfff\u00a0\u2028ab["), max_size=12
    ),
    st.integers(MAX_SEGMENT_PHRASE_CHARS - 2, MAX_SEGMENT_PHRASE_CHARS + 2).map(lambda n: "a" * n),
)


def local_accepts(phrase: str) -> bool:
    try:
        check_segment_args([phrase], 0.5)
    except UserError:
        return False
    return True


def schema_accepts(phrase: str) -> bool:
    try:
        SegmentRequest.model_validate({"image_id": "0" * 64, "phrases": [phrase]})
    except ValidationError:
        return False
    return True


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[TestClient, FakeSegmenter, str]]:
    segmenter = FakeSegmenter()
    with TestClient(create_app(segmenter)) as client:
        ok, png = cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))
        assert ok
        image_id = client.post("/v1/images", content=png.tobytes()).json()["image_id"]
        yield client, segmenter, image_id


@given(phrase=_phrases)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_the_local_check_and_the_service_accept_the_same_phrases(
    service: tuple[TestClient, FakeSegmenter, str], phrase: str
) -> None:
    client, segmenter, image_id = service
    accepted = local_accepts(phrase)
    assert schema_accepts(phrase) == accepted
    # Over HTTP too: JSON escapes carry surrogates and control characters as sent.
    body = json.dumps({"image_id": image_id, "phrases": [phrase]}, ensure_ascii=True)
    segmenter.phrases.clear()
    response = client.post(
        "/v1/segment", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == (200 if accepted else 422), response.text
    if accepted:
        # The segmenter behind the service reads what SAM 3 in-process reads.
        assert segmenter.phrases == [clean_phrase(phrase)]
        assert response.json()["results"][0]["phrase"] == clean_phrase(phrase)


@given(phrase=st.text(_any_char, max_size=40))
@settings(max_examples=200, deadline=None)
def test_a_phrase_the_agent_accepts_every_segmenter_accepts(phrase: str) -> None:
    try:
        params = SegmentPhraseParams(text_prompt=phrase)
    except ValidationError:
        return
    assert local_accepts(params.text_prompt) and schema_accepts(params.text_prompt)
    assert params.text_prompt == clean_phrase(phrase)


def test_a_control_character_goes_through_the_remote_client() -> None:
    segmenter = FakeSegmenter()
    app = create_app(segmenter)
    phrase = "a\x1b[2J red\x00car \ud83d"
    with TestClient(app) as client:

        def forward(request: httpx.Request) -> httpx.Response:
            answer = client.request(
                request.method,
                request.url.path,
                params=request.url.params,
                content=request.content,
                headers={"Content-Type": request.headers.get("content-type", "")},
            )
            return httpx.Response(answer.status_code, content=answer.content)

        remote = RemoteSegmenter(
            "http://testserver", transport=httpx.MockTransport(forward), retries=0
        )
        embedding = remote.embed(np.zeros((6, 6, 3), np.uint8))
        (detections,) = embedding.segment([phrase], 0.5)
        assert len(detections) == 0
        assert segmenter.phrases == ["a [2J red car"]
        assert embedding.used_phrase(phrase) == "a [2J red car"
