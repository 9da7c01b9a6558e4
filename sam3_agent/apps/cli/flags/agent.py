"""The agent and context flags: they build a validated :class:`AgentConfig`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sam3_agent.apps.cli.console import SETTING_OF, as_flags, say
from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import (
    CONTEXT_POLICIES,
    DEFAULT_MAX_PIXELS,
    TOOL_SETS,
    AgentConfig,
)
from sam3_agent.values.errors import UserError

AGENT_PANEL = "Agent"
CONTEXT_PANEL = "Context"

# Below it the numbered labels and the checks' zoomed view (>= 96 pixels) no longer fit.
MIN_IMAGE_SIDE = 128

_agent = functools.partial(flag, panel=AGENT_PANEL)
_context = functools.partial(flag, panel=CONTEXT_PANEL)

AGENT_FLAGS = (
    _agent("max_rounds", int, AgentConfig.max_rounds, "--max-rounds", metavar="N",
           help="Main MLLM calls per session."),
    _agent("max_corrections", int, AgentConfig.max_corrections, "--max-corrections", metavar="N",
           help="Model mistakes corrected per session before it fails."),
    _agent("check_concurrency", int, AgentConfig.check_concurrency, "--check-concurrency",
           metavar="N", help="Mask checks run at the same time."),
    _agent("score_threshold", float, AgentConfig.score_threshold, "--score-threshold",
           metavar="SCORE", help="SAM 3 score threshold."),
    _agent("max_image_side", int, AgentConfig.max_image_side, "--max-image-side", metavar="PIXELS",
           help="Longer side of images sent to the MLLM, in pixels."),
    _agent("max_pixels", int, DEFAULT_MAX_PIXELS, "--max-pixels", metavar="PIXELS",
           help="Largest input image or video frame, in width x height pixels (checked before "
           "decoding)."),
    _agent("prompts", Path | None, None, "--prompts", metavar="DIR",
           help="A directory holding another prompt set (the templates of prompts/); checked "
           "before any model loads. Default: the prompt set shipped with sam3-agent."),
    _agent("tools", str, AgentConfig.tool_set, "--tools", metavar="SET",
           help="The tool set: " + " or ".join(TOOL_SETS) + " (paper: the SAM 3 agent's four "
           "tools; extended: also visual exemplars and kept masks). See docs/tools.md."),
    _context("context_policy", str, AgentConfig.context_policy, "--context-policy",
             metavar="POLICY", help="How each call's context is chosen from the history: "
             + ", ".join(CONTEXT_POLICIES)
             + " (attention: in-process --llm hf:... only). See docs/context-policies.md."),
    _context("max_context_tokens", int, AgentConfig.max_context_tokens, "--max-context-tokens",
             metavar="TOKENS",
             help="The MLLM's context window; every call fits it minus the reply reserve "
             "(--reserve-tokens)."),
    _context("reserve_tokens", int, AgentConfig.context_reserve_tokens, "--reserve-tokens",
             metavar="TOKENS",
             help="Tokens of the context window kept free for the MLLM's reply (0 or more, "
             "below --max-context-tokens)."),
)  # fmt: skip


def check_agent(config: AgentConfig, backends: BackendSpec, *, chat: bool = True) -> None:
    """After :meth:`BackendSpec.validate`, before any model loads: the context policy
    against the MLLM (with ``chat``), and the prompt set."""
    if chat:
        backends.check_context(config)
    from sam3_agent.agent.prompts import load_prompt_set

    load_prompt_set(config.prompts_dir)


def plan_server(backends: BackendSpec, config: AgentConfig, out: Path) -> BackendSpec:
    """A server command's checks before its models load, its output directory made; the
    planned spec, its MLLM explicit."""
    backends.validate()
    check_agent(config, backends)
    plan = backends.plan()
    if plan.note:
        say(as_flags(plan.note))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the output directory {out}: {e}") from e
    return plan.spec


def _config(values: dict[str, Any], built: dict[str, Any]) -> AgentConfig:
    """The agent and context flags' :class:`AgentConfig` (``--tool-protocol`` from the
    backend flags)."""
    side, reserve = values["max_image_side"], values["reserve_tokens"]
    if side < MIN_IMAGE_SIDE:
        raise UserError(
            f"--max-image-side must be >= {MIN_IMAGE_SIDE} (room for the numbered masks and "
            f"the zoomed views), got {side}"
        )
    if reserve < 0:
        raise UserError(f"--reserve-tokens must be >= 0, got {reserve}")
    if values["max_context_tokens"] <= reserve:
        raise UserError(
            f"--max-context-tokens ({values['max_context_tokens']}) must exceed the reply reserve "
            f"(--reserve-tokens {reserve})"
        )
    backends = built.get("backends")
    protocol = backends.tool_protocol if isinstance(backends, BackendSpec) else "tags"
    fields = {SETTING_OF.get(name, name): value for name, value in values.items()}
    return AgentConfig(**fields, tool_protocol=protocol)


AGENT = FlagGroup("config", AGENT_FLAGS, _config)
"""The agent and context flags: a validated :class:`AgentConfig` (after ``BACKENDS``)."""
