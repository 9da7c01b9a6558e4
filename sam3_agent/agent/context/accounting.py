"""Where the calls a policy makes on its own (``summary``'s digests) are counted and traced."""

from __future__ import annotations

from collections.abc import Callable

from sam3_agent.agent.context.summary import DigestCall, DigestSink
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.result import Usage
from sam3_agent.values.files import Trace


def digest_recorder(
    usage: Usage, trace: Trace, counter: TokenCounter, current_round: Callable[[], int]
) -> DigestSink:
    """A sink adding each digest call to ``usage.digests`` (apart from the main calls) and
    writing it to the trace as a ``"kind": "digest"`` record."""

    def record(call: DigestCall) -> None:
        usage.digests = usage.digests + call.response.usage
        usage.cached_calls += int(call.response.cached)
        tokens = counter.messages(call.messages)
        usage.add_estimate("digests", tokens.text, tokens.image)
        if not trace.enabled:
            return
        trace.record(
            {
                "kind": "digest",
                "round": current_round(),
                "rounds_condensed": list(call.rounds),
                "blocking": call.blocking,
                "context": trace.messages(call.messages),
                "reply": call.response.text,
                "usage": call.response.usage.to_dict(),
                "tokens_estimate": tokens.to_dict(),
                "latency_s": round(call.latency_s, 4),
            }
        )

    return record
