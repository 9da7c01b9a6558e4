"""The demo's HTML: escaped text, inlined images, one block per round."""

from __future__ import annotations

import html
import re

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.agent.loop import MaskCheck, RoundEvent
from sam3_agent.apps.demo.views import (
    EMPTY_ROUNDS,
    round_html,
    round_title,
    rounds_html,
    status_html,
)
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import TokenUsage

PIXELS = np.zeros((8, 12, 3), np.uint8)
IMAGE = EncodedImage.encode(PIXELS, "r001_masks")
TAG = re.compile(r"<[^>]*>")


def event(**fields: object) -> RoundEvent:
    base: dict[str, object] = {
        "round": 1,
        "tool": "segment_phrase",
        "kind": "segment",
        "summary": "found 2 masks",
    }
    return RoundEvent(**{**base, **fields})  # type: ignore[arg-type]


def test_round_title_names_the_call_tokens_and_time():
    e = event(parameters={"text_prompt": "cat"}, usage=TokenUsage(1200, 34, 1), seconds=2.345)
    assert (
        round_title(e) == 'Round 1 · segment_phrase {"text_prompt": "cat"} · 1,234 tokens · 2.3 s'
    )
    assert "no readable tool call" in round_title(event(tool=None, kind="correction"))
    long = round_title(event(parameters={"text_prompt": "x" * 500}))
    assert len(long) < 200 and "…" in long


def test_a_round_shows_reasoning_observation_checks_and_image():
    checks = (
        MaskCheck(1, True, "<think>yes</think><verdict>Accept</verdict>", IMAGE, IMAGE),
        MaskCheck(2, False, "no", IMAGE, IMAGE),
    )
    block = round_html(
        event(
            kind="examine",
            reasoning="look closer",
            observation="1 kept",
            image=IMAGE,
            checks=checks,
        )
    )
    assert '<div class="s3a-reasoning">look closer</div>' in block
    assert '<div class="s3a-observation">1 kept</div>' in block
    assert block.count("s3a-check s3a-accept") == 1 and block.count("s3a-check s3a-reject") == 1
    assert "&lt;verdict&gt;Accept&lt;/verdict&gt;" in block
    assert block.count(f'src="{IMAGE.data_url()}"') == 3  # two close-ups, the masks image
    assert 'width="12" height="8"' in block


def test_rounds_in_order_and_the_empty_state():
    assert rounds_html([]) == EMPTY_ROUNDS
    page = rounds_html([event(round=1), event(round=2, kind="final")])
    assert page.index('data-round="1"') < page.index('data-round="2"')


@given(st.text(min_size=1, max_size=200))
def test_whatever_the_model_writes_stays_text(text: str):
    block = round_html(
        event(reasoning=text, observation=text, parameters={"text_prompt": text}, summary=text)
    )
    # No tag of the model's survives: the only tags are the view's own.
    own = {"details", "/details", "summary", "/summary", "div", "/div"}
    assert {t.split()[0].strip("<>") for t in TAG.findall(block)} <= own
    assert html.escape(text, quote=True) in block
    status = status_html("error", text)
    assert html.escape(text, quote=True) in status
    assert {t.split()[0].strip("<>") for t in TAG.findall(status)} <= {"div", "/div"}


def test_each_tab_gets_the_same_rules_under_its_own_ids() -> None:
    from sam3_agent.apps.demo.views import page_css

    image_only, both = page_css(video=False), page_css(video=True)
    for prefix in ("s3a", "s3a-video"):
        for rule in ("-rounds .s3a-rounds {", "-rounds .s3a-empty {", "-main {", "-after {"):
            assert (f"#{prefix}{rule}" in both) and (
                (f"#{prefix}{rule}" in image_only) == (prefix == "s3a")
            )
    assert both.count(".s3a-status-done {") == 1  # the shared rules once
