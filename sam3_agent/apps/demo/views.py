"""HTML for a session's rounds and status line: every text escaped, images inlined as data
URLs; class names start with ``s3a-``."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from sam3_agent.agent.loop import MaskCheck, RoundEvent
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.values.images import EncodedImage

EMPTY_ROUNDS = '<div class="s3a-rounds s3a-empty">The rounds will appear here.</div>'

# Long parameter values (a paragraph pasted as a phrase) would stretch the round's title.
_MAX_TITLE_PARAMS = 120


_esc = html.escape  # quotes too


def _img(image: EncodedImage, css_class: str, alt: str) -> str:
    return (
        f'<img class="{css_class}" src="{image.data_url()}" alt="{_esc(alt)}" '
        f'width="{image.width}" height="{image.height}">'
    )


def round_title(event: RoundEvent) -> str:
    """``Round 2 · segment_phrase {"text_prompt": "cat"} · 1,020 tokens · 0.4 s`` (plain text)."""
    call = event.tool or "no readable tool call"
    if event.parameters:
        params = json.dumps(event.parameters, ensure_ascii=False)
        if len(params) > _MAX_TITLE_PARAMS:
            params = params[: _MAX_TITLE_PARAMS - 1] + "…"
        call = f"{call} {params}"
    tokens = event.usage.total_tokens
    return f"Round {event.round} · {call} · {tokens:,} tokens · {event.seconds:.1f} s"


def _check(check: MaskCheck) -> str:
    verdict = "accept" if check.accepted else "reject"
    label = f"mask {check.number}: {verdict.capitalize()}"
    return (
        f'<figure class="s3a-check s3a-{verdict}">'
        f"{_img(check.zoom_image, 's3a-zoom', f'close-up of mask {check.number}')}"
        f"<figcaption><b>{_esc(label)}</b>"
        f'<span class="s3a-check-reply">{_esc(check.reply)}</span></figcaption>'
        "</figure>"
    )


def round_html(event: RoundEvent) -> str:
    """One round as a ``<details>`` block: reasoning, what came back, masks, verdicts."""
    parts = [
        f'<details class="s3a-round s3a-{_esc(event.kind)}" open data-round="{event.round}">',
        f"<summary>{_esc(round_title(event))}</summary>",
    ]
    if event.reasoning:
        parts.append(f'<div class="s3a-reasoning">{_esc(event.reasoning)}</div>')
    if event.observation:
        parts.append(f'<div class="s3a-observation">{_esc(event.observation)}</div>')
    if event.checks:
        parts.append('<div class="s3a-checks">')
        parts.extend(_check(c) for c in event.checks)
        parts.append("</div>")
    if event.image is not None:
        parts.append(_img(event.image, "s3a-masks", f"masks after round {event.round}"))
    parts.append("</details>")
    return "".join(parts)


def rounds_html(events: Sequence[RoundEvent]) -> str:
    """Every round so far, newest last."""
    if not events:
        return EMPTY_ROUNDS
    body = "".join(round_html(e) for e in events)
    return f'<div class="s3a-rounds">{body}</div>'


_SHARED_CSS = """
.s3a-round { border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 0.4rem 0.8rem; }
.s3a-round summary { font-weight: 600; cursor: pointer; }
.s3a-correction summary { color: var(--color-accent); }
.s3a-reasoning { font-style: italic; white-space: pre-wrap; margin: 0.4rem 0;
  color: var(--body-text-color-subdued); }
.s3a-observation { white-space: pre-wrap; margin: 0.4rem 0; }
.s3a-masks { max-width: 100%; height: auto; border-radius: 4px; }
.s3a-checks { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr));
  gap: 0.5rem; margin: 0.4rem 0; }
.s3a-check { margin: 0; border-radius: 6px; padding: 0.3rem; }
.s3a-check img { max-width: 100%; height: auto; }
.s3a-check figcaption { font-size: 0.85em; display: flex; flex-direction: column; }
.s3a-check-reply { white-space: pre-wrap; max-height: 6em; overflow: auto; }
.s3a-accept { border: 2px solid #2e9e4f; }
.s3a-reject { border: 2px solid #c9372c; }
.s3a-status { padding: 0.5rem 0.8rem; border-radius: 6px;
  background: var(--background-fill-secondary); }
.s3a-status-error { background: #fdecea; color: #8a1c13; }
.s3a-status-done { background: #e7f6ec; color: #1d5e31; }
.s3a-status-stopped { background: #fff4e0; color: #7a4b00; }
"""

_TAB_CSS = """
#{p}-rounds .s3a-rounds {{ display: flex; flex-direction: column; gap: 0.6rem; }}
#{p}-rounds .s3a-empty {{ color: var(--body-text-color-subdued); padding: 1rem 0; }}
/* Narrow screens: the rounds right under the status line, the result and downloads after. */
@media (max-width: 767px) {{
  #{p}-main {{ flex-direction: column; flex-wrap: nowrap; }}
  #{p}-left {{ display: contents; }}
  #{p}-form {{ order: 0; }}
  #{p}-right {{ order: 1; }}
  #{p}-after {{ order: 2; }}
}}
"""


def page_css(video: bool) -> str:
    """The page's CSS: every tab's rules, and each tab's own by its element ids."""
    prefixes = ("s3a", "s3a-video") if video else ("s3a",)
    return _SHARED_CSS + "".join(_TAB_CSS.format(p=p) for p in prefixes)


def status_html(kind: str, text: str) -> str:
    """The status line. ``kind``: ``idle``, ``running``, ``done``, ``stopped`` or ``error``."""
    return f'<div class="s3a-status s3a-status-{_esc(kind)}">{_esc(text)}</div>'


def _summary(
    result: AgentResult | VideoResult, noun: str, scores: list[float], over: str = ""
) -> str:
    """One line on how a finished session ended, with its cost."""
    total = result.usage.total.total_tokens
    cost = f"{result.rounds} round(s), {total:,} tokens, {result.timings.get('total', 0.0):.1f} s"
    if result.status == "masks":
        listed = ", ".join(f"{i + 1}: {score:.2f}" for i, score in enumerate(scores))
        return f"{len(scores)} {noun}(s) (scores {listed}){over} in {cost}"
    if result.status == "no_mask":
        return f"no {noun}: the model found nothing matching{over}, in {cost}"
    return f"failed: {result.failure} ({cost})"


def result_summary(result: AgentResult) -> str:
    """One line on how a finished session ended, with its cost."""
    return _summary(result, "mask", result.detections.scores.tolist())


def video_summary(result: VideoResult) -> str:
    """One line on how a finished video session ended, with its cost."""
    frames = len(result.video.get("frames_used", ()))
    return _summary(result, "track", [t.score for t in result.tracks], f" over {frames} frames")
