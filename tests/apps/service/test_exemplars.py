"""Exemplars through the SAM 3 service: the same answers as in process, bad ones refused."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sam3_agent.backends.sam3_local import Sam3Segmenter
from sam3_agent.backends.sam3_remote import RemoteSegmenter
from sam3_agent.values.detections import Exemplars
from tests.apps.service.test_service import (  # noqa: F401 (fixtures)
    PHRASES,
    TOKEN,
    assert_json_error,
    assert_same,
    http,
    local,
    make_image,
    offline_module,
    served,
    url,
)

EXEMPLARS = Exemplars(((9, 12, 45, 60), (50, 70, 90, 120)), (True, False))


def test_remote_with_exemplars_matches_in_process(url: str, local: Sam3Segmenter) -> None:  # noqa: F811
    image = make_image(5)
    with RemoteSegmenter(url, TOKEN) as remote:
        embedding = remote.embed(image)
        got = embedding.segment(PHRASES, 0.0, EXEMPLARS)
        plain = embedding.segment(PHRASES, 0.0)
    here = local.embed(image)
    for g, w in zip(got, here.segment(PHRASES, 0.0, EXEMPLARS), strict=True):
        assert_same(g, w)
    for g, w in zip(plain, here.segment(PHRASES, 0.0), strict=True):
        assert_same(g, w)


@pytest.mark.parametrize(
    "exemplars",
    [
        {"boxes": [[0, 0, 1, 1]], "positive": []},  # a box without its label
        {"boxes": [[0, 0, 1]], "positive": [True]},
        {"boxes": [[0, 0, 1, 1]] * 33, "positive": [True] * 33},
        {"boxes": [], "positive": [], "extra": 1},
    ],
)
def test_bad_exemplars_are_refused(http: httpx.Client, exemplars: Any) -> None:  # noqa: F811
    body = {"image_id": "0" * 64, "phrases": ["a"], "exemplars": exemplars}
    assert_json_error(http.post("/v1/segment", json=body), 422, "invalid_request")
