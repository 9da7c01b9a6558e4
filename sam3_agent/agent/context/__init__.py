"""Context management: one :class:`~.policy.ContextPolicy` per session (by name,
:mod:`.registry`) turns the history into each main call's messages and an eviction record
(the policies: docs/context-policies.md).

Eviction log schema
-------------------
Every ``"kind": "main"`` record of ``trace.jsonl`` carries ``"context_policy"``::

    {
      "policy": "hierarchical",          # the --context-policy name
      "mode": null | "sam3" | "hierarchical",  # auto only: the policy in use this call
      "budget": {"max_context_tokens": int, "reserve_tokens": int,
                 "limit": int,            # max_context_tokens - reserve_tokens
                 "watermark": float},     # share of limit (hierarchical, auto)
      "tokens_before": int,              # every round sent in full (keep-all's size)
      "tokens_after": {"text": int, "image": int, "total": int},  # what was sent
      "kept_rounds": [int],              # 1-based round numbers sent in full
      "evicted": [{"round": int, "reason": str, "score": float?}],
      "images_replaced_by_text": [int],  # rounds whose masks image became a line of text
      "tried_phrases_note": [str],       # phrases named in the request's note
      "zones": null | {"pinned": int, "working": int, "archive": int, "reserve": int},
      "scores": null | {"<round>": float},  # decay: weight*exp(-rate*age); attention: mass
      "switch": null | {"round": int, "from": str, "to": str,
                        "sam3_tokens": int, "watermark_tokens": int},   # auto
      "digests": null | {"shown": [{"rounds": [int], "level": 1}],      # summary, round order
                         "dropped": [[int]],         # digests dropped for space this call
                         "dropped_rounds": [int],    # evicted rounds no shown digest covers
                         "blocking_call_rounds": [int],
                         "waited_for_background_ms": float, "calls_total": int},
      "latency_ms": float                # time the policy took for this call
    }

Next to it, ``"tokens_estimate"`` holds this package's count of the request
(``{"text", "image", "total", "per_message": [int], "source": "estimate" |
"tokenizer:<model>"}``; ``total`` includes the generation prompt, which no message holds)
beside ``"usage"``, the count the endpoint reported. Digest calls
of ``summary`` are records of ``"kind": "digest"`` with their own ``usage`` and estimate.
"""

from __future__ import annotations

from sam3_agent.agent.context.policy import ContextPolicy
from sam3_agent.agent.context.tokens import Tokens, counter_for
from sam3_agent.agent.context.types import Context, ContextBudgetError, History

__all__ = ["Context", "ContextBudgetError", "ContextPolicy", "History", "Tokens", "counter_for"]
