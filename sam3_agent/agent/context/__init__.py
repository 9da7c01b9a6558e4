"""Context management: one :class:`~.policy.ContextPolicy` per session (by name,
:mod:`.registry`) turns the history into each main call's messages and an eviction record
(the policies and the eviction log schema: docs/context-policies.md)."""

from __future__ import annotations

from sam3_agent.agent.context.policy import ContextPolicy
from sam3_agent.agent.context.tokens import Tokens, counter_for
from sam3_agent.agent.context.types import Context, ContextBudgetError, History

__all__ = ["Context", "ContextBudgetError", "ContextPolicy", "History", "Tokens", "counter_for"]
