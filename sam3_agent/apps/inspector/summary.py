"""The words both renderers show, as plain text they escape for their medium."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from sam3_agent.apps.inspector import views
from sam3_agent.apps.inspector.views import as_dict, as_float, as_int, as_list, as_str

REPORTED = "reported by the endpoint"
"""The endpoint's own token counts (a call's ``usage``), beside the two the agent counts."""

REQUEST_COUNT = "tokens counted on the whole request (messages and the reply's opening)"
"""The context policy's count of a request, as it fitted the request to its budget."""


def compact(value: Any, limit: int = 400) -> str:
    """``value`` as one line of JSON, cut at ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(record: dict[str, Any]) -> str:
    return f"{as_int(record, 'width')}x{as_int(record, 'height')}"


def run_facts(run: views.RunView) -> list[tuple[str, str]]:
    """(label, value) pairs describing the session as a whole."""
    result = run.result or {}
    facts = [("run directory", str(run.directory))]
    if not result:
        facts.append(("result", "no result.json: the session did not finish"))
    else:
        video, failure = as_dict(result, "video"), as_str(result, "failure")
        if video:  # the frames it tracked, and each track's span of them
            used = as_list(video, "frames_used")
            note = as_str(video, "note")
            source = ("video", f"{as_str(video, 'path')} {_size(video)}, {len(used)} frame(s) "
                      f"tracked" + (f" ({note})" if note else ""))  # fmt: skip
            tracks, spans = as_list(result, "tracks"), []
            for track in tracks:
                extent = as_list(track, "extent")
                if len(extent) == 2 and all(
                    isinstance(p, int) and 0 <= p < len(used) for p in extent
                ):
                    spans.append(f"frames {used[extent[0]]}-{used[extent[1]]}")
            answer = ("tracks", str(len(tracks)) + (f": {'; '.join(spans)}" if spans else ""))
        else:
            image = as_dict(result, "image")
            source = ("image", f"{as_str(image, 'path') or '(array)'} {_size(image)}")
            answer = ("masks", str(len(as_list(result, "masks"))))
        tried = ", ".join(str(p) for p in as_list(result, "phrases_tried")) or "none"
        facts += [
            ("query", as_str(result, "query")), source,
            ("status", as_str(result, "status") + (f": {failure}" if failure else "")),
            ("rounds", str(as_int(result, "rounds"))), answer,
            ("model", as_str(result, "model")), ("phrases tried", tried),
        ]  # fmt: skip
        usage = as_dict(result, "usage")
        parts = [
            f"{part} {as_int(tokens, 'prompt_tokens')}+{as_int(tokens, 'completion_tokens')} in "
            f"{as_int(tokens, 'calls')} call(s)"
            for part in ("main", "checks", "digests", "total") if (tokens := as_dict(usage, part))
        ]  # fmt: skip
        facts.append((f"tokens {REPORTED} (prompt+completion)", "; ".join(parts)))
        if timings := as_dict(result, "timings_s"):
            facts.append(
                ("timings", ", ".join(f"{k} {_fmt_s(as_float(timings, k))}" for k in timings))
            )
    if run.committed_round is not None:
        after = "the session ended" if run.ended else "resumable with run --resume"
        facts.append(("committed", f"round {run.committed_round} in session.json; {after}"))
    return facts


def _fmt_s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.2f} s"


def context_heading(view: views.RoundView) -> str:
    """The round's context line: its messages and their tokens, and who counted them."""
    sources = {m.tokens_source for m in view.messages}
    how = "counted by the agent" if sources == {"trace"} else "estimated by the inspector"
    return (
        f"context as sent: {len(view.messages)} message(s), {view.context_tokens} tokens "
        f"counted on its messages ({how})"
    )


def eviction_lines(view: views.RoundView) -> list[str]:
    """What the context of this round kept, left out and why, one fact per line."""
    e = view.eviction
    if view.eviction_source == "none":
        return ["no record of what the context left out"]
    lines = []
    if view.eviction_source == "context_policy":
        mode, budget, after = as_str(e, "mode"), as_dict(e, "budget"), as_dict(e, "tokens_after")
        watermark = as_float(budget, "watermark")
        lines.append(
            f"policy {as_str(e, 'policy') or '?'}" + (f" (as {mode})" if mode else "")
            + (f", budget {as_int(budget, 'limit')} of {as_int(budget, 'max_context_tokens')} "
               "tokens" if budget else "")
            + (f", watermark {watermark}" if watermark is not None else "")
        )  # fmt: skip
        if as_int(e, "tokens_before") is not None or after:
            lines.append(
                f"{REQUEST_COUNT}: {as_int(e, 'tokens_before')} with every round in full, "
                f"{as_int(after, 'total')} sent ({as_int(after, 'text')} text, "
                f"{as_int(after, 'image')} image)"
            )
    lines.append(f"kept rounds: {_rounds(as_list(e, 'kept_rounds'))}")
    evicted = [x for x in as_list(e, "evicted") if isinstance(x, dict)]
    for x in evicted:
        score = as_float(x, "score")
        lines.append(
            f"evicted round {as_int(x, 'round')}: {as_str(x, 'reason') or 'no reason given'}"
            + (f" (score {score:.4g})" if score is not None else "")
        )
    if not evicted and as_list(e, "dropped_rounds"):
        lines.append(
            f"dropped rounds: {_rounds(as_list(e, 'dropped_rounds'))} (three-part pruning)"
        )
    elif not evicted:
        lines.append("nothing evicted")
    if replaced := as_list(e, "images_replaced_by_text"):
        lines.append(f"masks images replaced by a line of text: rounds {_rounds(replaced)}")
    if tried := as_list(e, "tried_phrases_note"):
        notes = ", ".join(json.dumps(p, ensure_ascii=False) for p in tried)
        lines.append(f"tried-phrases note: {notes}")
    lines += [
        f"{key}: {compact(e[key])}"
        for key in ("zones", "scores", "switch", "digests")
        if e.get(key)
    ]
    if (latency := as_float(e, "latency_ms")) is not None:
        lines.append(f"policy time: {latency:.3f} ms")
    return lines


def kept_line(view: views.RoundView) -> str | None:
    """``kept for the answer: K1 (from "man"), K2 (from "dog")``; None with nothing kept."""
    if not view.kept:
        return None
    named = [
        f"{as_str(k, 'label')} (from {json.dumps(as_str(k, 'from'), ensure_ascii=False)})"
        for k in view.kept
        if isinstance(k, dict)
    ]
    return f"kept for the answer: {', '.join(named)}"


def _rounds(values: list[Any]) -> str:
    return ", ".join(str(v) for v in values) or "none"


def checks_summary(view: views.RoundView) -> str:
    """``3 mask checks: 2 accept, 1 reject; 1.20 s of calls``."""
    verdicts = Counter(c.verdict or "no verdict" for c in view.checks)
    tally = ", ".join(f"{n} {v}" for v, n in verdicts.items())
    seconds = sum(c.latency_s or 0.0 for c in view.checks)
    return f"{len(view.checks)} mask check call(s): {tally}; {seconds:.2f} s of calls"


def usage_line(usage: dict[str, Any], latency_s: float | None, cached: bool = False,
               round_s: float | None = None) -> str:  # fmt: skip
    """Tokens and timings of one call (and of its whole round, when given)."""
    parts = [
        f"{REPORTED}: prompt {as_int(usage, 'prompt_tokens')}, "
        f"completion {as_int(usage, 'completion_tokens')} tokens"
    ] if usage else []  # fmt: skip
    if latency_s is not None:
        parts.append(f"call {latency_s:.2f} s")
    if round_s is not None:
        parts.append(f"round {round_s:.2f} s with the tool")
    if cached:
        parts.append("from the response cache")
    return "; ".join(parts) or "no usage recorded"


def round_title(view: views.RoundView) -> str:
    if not view.complete:
        return f"Round {view.number}: unfinished (the session stopped during it)"
    return f"Round {view.number}: {view.tool_name or 'no tool call'} -> {view.outcome_kind or '?'}"
