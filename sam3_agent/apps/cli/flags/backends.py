"""The SAM 3 and backend flags: an unvalidated :class:`~sam3_agent.backends.spec.BackendSpec`
(the command validates it for its mode)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.backends.identity import TOKEN_ENV
from sam3_agent.backends.segmenters import DEFAULT_SAM3_MODEL
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.backends.torch_runtime import DTYPE_NAMES
from sam3_agent.values.config import ToolProtocol

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
