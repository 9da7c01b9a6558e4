"""Context management: which parts of the history each main MLLM call receives.

One :class:`~sam3_agent.agent.context.policy.ContextPolicy` per session turns the typed history
(:mod:`sam3_agent.agent.steps`) into the messages sent plus an eviction record. Policies, by
``--context-policy`` name (:mod:`sam3_agent.agent.context.registry`):

``sam3`` (default, :mod:`.sam3`), ``keep-all`` (:mod:`.keep_all`), ``fifo`` (:mod:`.fifo`),
``decay`` (:mod:`.decay`), ``summary`` (:mod:`.summary`), ``hierarchical``
(:mod:`.hierarchical`), ``attention`` (:mod:`.attention`), ``auto`` (:mod:`.auto`).
Token accounting is in :mod:`.tokens`; the interface, the invariants every policy keeps and
the base class that measures, checks and records every call are in :mod:`.policy`; the values
they share (history, budget, context, eviction record) in :mod:`.types`.

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
from sam3_agent.agent.context.tokens import TokenCounter, Tokens, counter_for
from sam3_agent.agent.context.types import (
    Budget,
    Context,
    ContextBudgetError,
    EvictionRecord,
    History,
)

__all__ = [
    "Budget",
    "Context",
    "ContextBudgetError",
    "ContextPolicy",
    "EvictionRecord",
    "History",
    "TokenCounter",
    "Tokens",
    "counter_for",
]
