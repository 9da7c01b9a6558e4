"""The flags that build the agent: SAM 3 and the backends (an unvalidated
:class:`~sam3_agent.backends.spec.BackendSpec`, the command validates it for its mode), then
the agent and context flags (a validated :class:`AgentConfig`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sam3_agent.apps.cli.console import SETTING_OF, as_flags, say
from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.backends.identity import TOKEN_ENV
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.backends.torch_runtime import DTYPE_NAMES
from sam3_agent.values.config import (
    CONTEXT_POLICIES,
    DEFAULT_MAX_PIXELS,
    TOOL_SETS,
    AgentConfig,
    ToolProtocol,
)
from sam3_agent.values.errors import UserError

_flag = functools.partial(flag, panel="Backends")

SAM3_WEIGHTS = _flag("sam3", str, DEFAULT_SAM3_MODEL, "--sam3", metavar="MODEL",
    help="SAM 3 weights: a Hugging Face hub id (gated: accept the licence, set HF_TOKEN) or a "
    "local directory.")  # fmt: skip
DEVICE = _flag("device", str, "auto", "--device", metavar="DEVICE",
    help="Device for in-process models: auto, cpu, cuda, cuda:1.")  # fmt: skip
DTYPE = _flag("dtype", str, "auto", "--dtype", metavar="DTYPE",
    help="dtype for in-process models: auto (bfloat16 on CUDA, and on a CPU that computes it "
    "natively; else float32), " + ", ".join(DTYPE_NAMES[1:]) + ".")  # fmt: skip


def _spec(values: dict[str, Any], built: dict[str, Any]) -> BackendSpec:
    return BackendSpec(**values)


SAM3 = FlagGroup("backends", (SAM3_WEIGHTS, DEVICE, DTYPE), _spec)
"""``--sam3``, ``--device``, ``--dtype`` (``serve-sam3``): SAM 3 in this process."""

BACKENDS = FlagGroup("backends", (
    SAM3_WEIGHTS,
    _flag("sam3_url", str | None, None, "--sam3-url", metavar="URL",
          help="Use a SAM 3 service (`sam3-agent serve-sam3`) at this URL instead of loading "
          "SAM 3 in this process."),
    _flag("sam3_token", str | None, None, "--sam3-token", metavar="TOKEN", envvar=TOKEN_ENV,
          help="Bearer token for the SAM 3 service."),
    DEVICE,
    DTYPE,
    _flag("llm", str | None, None, "--llm", metavar="hf:MODEL",
          help="In-process MLLM: 'hf:<hub id or local dir>'. Used when no --llm-url is given."),
    _flag("llm_url", list[str] | None, None, "--llm-url", metavar="URL",
          help="OpenAI-compatible endpoint (vLLM, hosted API), e.g. http://localhost:8000/v1. "
          "Repeat for several servers of the same model: calls are spread over them and fail "
          "over when one is down. Default: OPENAI_BASE_URL when set and --llm is not given."),
    _flag("llm_model", str | None, None, "--llm-model", metavar="NAME",
          help="Model name at the endpoint."),
    _flag("llm_api_key", str | None, None, "--llm-api-key", metavar="KEY",
          envvar="OPENAI_API_KEY", help="API key for the endpoint."),
    _flag("llm_timeout", float, 120.0, "--llm-timeout", metavar="SECONDS",
          help="Seconds per MLLM request."),
    _flag("temperature", float | None, None, "--temperature", metavar="T",
          help="MLLM sampling temperature, 0..2 (default: 0, greedy)."),
    _flag("max_tokens", int | None, None, "--max-tokens", metavar="N",
          help="Completion tokens per MLLM request (default: 4096 at an endpoint, 2048 "
          "in-process); reasoning models may need more."),
    _flag("seed", int | None, None, "--seed", metavar="N",
          help="MLLM sampling seed (endpoints that honour it)."),
    _flag("llm_extra", str | None, None, "--llm-extra", metavar="JSON",
          help="JSON object merged into each request body, e.g. "
          '\'{"chat_template_kwargs": {"enable_thinking": true}}\'; in-process only '
          "chat_template_kwargs is read."),
    _flag("memory_check", bool, True, "--memory-check/--no-memory-check",
          help="Before loading in-process models, refuse those that would not fit in the "
          "memory available (estimated from their config.json)."),
    _flag("tool_protocol", ToolProtocol, "tags", "--tool-protocol",
          help="tags: tool calls as <tool>{json}</tool> in the reply; native: the API's "
          "structured tool calls."),
    _flag("cache", Path | None, None, "--cache", metavar="FILE",
          help="SQLite file caching MLLM responses; identical requests cost no tokens."),
    _flag("replay", bool, False, "--replay",
          help="With --cache: a request not in the cache is an error (deterministic reruns)."),
), _spec)  # fmt: skip
"""Every backend and generation flag (``run``, ``eval``, ``batch``, ``demo``)."""


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
