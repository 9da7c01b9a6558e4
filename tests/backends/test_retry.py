"""The one retry policy every HTTP client uses: backoff, jitter, caps and ``Retry-After``."""

from __future__ import annotations

import math
import random

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.backends.retry import RetryPolicy, retry_after
from sam3_agent.backends.sam3_remote import RemoteSegmenter

seconds = st.floats(0.0, 100.0)


@given(
    retry=st.integers(1, 5000),
    base=seconds,
    cap=seconds | st.just(math.inf),
    asked=st.none() | st.floats(allow_nan=False),
    jitter=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_every_wait_is_bounded(
    retry: int, base: float, cap: float, asked: float | None, jitter: bool, seed: int
) -> None:
    policy = RetryPolicy(
        backoff_base_s=base, backoff_cap_s=cap, max_retry_after_s=60.0, jitter=jitter
    )
    wait = policy.delay(retry, asked, random.Random(seed))
    if asked is not None:
        assert wait == min(max(asked, 0.0), 60.0)
        return
    ceiling = min(cap, base * 2.0 ** min(retry - 1, 64))
    if jitter:
        assert ceiling / 2 <= wait <= ceiling
    else:
        assert wait == ceiling


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"Retry-After": "x"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date already past
        ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5),
        ({"retry-after-ms": "nan", "Retry-After": "9"}, 9.0),
    ],
)
def test_retry_after_reads_seconds_milliseconds_and_dates(
    headers: dict[str, str], expected: float | None
) -> None:
    assert retry_after(httpx.Response(503, headers=headers)) == expected


def test_the_service_client_reads_retry_after_as_the_chat_client_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("sam3_agent.backends.service_client.time.sleep", slept.append)
    busy = {"error": "busy", "code": "busy"}
    answers = iter(
        [
            httpx.Response(503, json=busy, headers={"retry-after-ms": "250"}),
            httpx.Response(503, json=busy, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
            httpx.Response(503, json=busy, headers={"Retry-After": "Fri, 31 Dec 2999 23:59:59 GMT"}),
            httpx.Response(503, json=busy, headers={"Retry-After": "nan"}),
            httpx.Response(200, json={"image_id": "0" * 64, "image_size": [4, 4]}),
        ]
    )  # fmt: skip
    remote = RemoteSegmenter(
        "http://127.0.0.1:9",
        "t",
        retries=4,
        backoff_s=0.5,
        transport=httpx.MockTransport(lambda request: next(answers)),
    )
    remote.embed(np.zeros((4, 4, 3), np.uint8))
    # Its milliseconds, a past date, a far date at the cap, our backoff when unreadable.
    assert slept == [0.25, 0.0, 60.0, 4.0]
