"""Context policies by name: what ``--context-policy NAME`` and ``AgentConfig`` select."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sam3_agent.agent.context.attention import AttentionPolicy, require_source
from sam3_agent.agent.context.hierarchical import AutoPolicy, HierarchicalPolicy
from sam3_agent.agent.context.policy import ContextPolicy, DecayPolicy, FifoPolicy, KeepAllPolicy
from sam3_agent.agent.context.sam3 import Sam3Policy
from sam3_agent.agent.context.summary import DigestSink, SummaryPolicy
from sam3_agent.agent.context.tokens import TokenCounter
from sam3_agent.agent.context.types import Budget
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import UserError


@dataclass(frozen=True)
class PolicyInputs:
    """What a policy may need besides the config: built once per session."""

    config: AgentConfig
    counter: TokenCounter
    chat_model: Any
    on_digest: DigestSink | None = None

    @property
    def budget(self) -> Budget:
        c = self.config
        return Budget(c.max_context_tokens, c.context_reserve_tokens, c.context_watermark)


POLICIES: dict[str, Callable[[PolicyInputs], ContextPolicy]] = {
    "sam3": lambda i: Sam3Policy(i.budget, i.counter),
    "keep-all": lambda i: KeepAllPolicy(i.budget, i.counter),
    "fifo": lambda i: FifoPolicy(i.budget, i.counter),
    "decay": lambda i: DecayPolicy(
        i.budget, i.counter, dict(i.config.decay_weights), i.config.decay_rate
    ),
    "summary": lambda i: SummaryPolicy(i.budget, i.counter, i.chat_model, on_digest=i.on_digest),
    "hierarchical": lambda i: HierarchicalPolicy(i.budget, i.counter),
    "attention": lambda i: AttentionPolicy(
        i.budget, i.counter, require_source(i.chat_model), i.config.attention_window
    ),
    "auto": lambda i: AutoPolicy(i.budget, i.counter),
}
"""In :data:`~sam3_agent.values.config.CONTEXT_POLICIES` order (a test checks it)."""


def build_policy(inputs: PolicyInputs) -> ContextPolicy:
    """A fresh policy for one session."""
    factory = POLICIES.get(inputs.config.context_policy)
    if factory is None:
        raise UserError(
            f"unknown context policy {inputs.config.context_policy!r}; "
            f"choose one of {', '.join(POLICIES)}"
        )
    return factory(inputs)


def check_backend(config: AgentConfig, chat_model: Any) -> None:
    """Refuse at start-up a policy the MLLM backend cannot serve (one-line UserError)."""
    if config.context_policy == "attention":
        require_source(chat_model)
