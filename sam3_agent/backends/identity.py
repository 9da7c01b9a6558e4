"""What a backend answers with, besides the request: its description (``describe()``).

A resumed session must be answered by the same models with the same settings, or its later
rounds would follow other rules than its earlier ones. Each backend says what shapes its
answers (:class:`~sam3_agent.backends.base.DescribesItself`), and
:meth:`~sam3_agent.backends.spec.BackendSpec.describe` says the same from the options alone,
before anything loads; both build their descriptions with the functions here, so the two
agree by construction.

A description maps the user-facing option (the CLI flag; the same names are
:func:`sam3_agent.segment`'s keywords) to a JSON-ready value, defaults resolved: what the
backend sends or loads. ``None``: the option is not set (no seed, a remote SAM 3 has no
``--sam3``). An option left out is unknown (a model built by hand, a dtype not resolved yet)
and is not compared.

Pure data, no heavy imports.
"""

from __future__ import annotations

import json
from typing import Any

from sam3_agent.backends.generation import GenerationSettings, canonical_json

HF_PREFIX = "hf:"
"""``--llm hf:<hub id or dir>``: the MLLM in this process."""

CHAT = "mllm"
SEGMENTER = "sam3"
"""The two parts of a session's backend description: ``{CHAT: ..., SEGMENTER: ...}``."""


def chat_description(
    *,
    model: str,
    in_process: bool,
    temperature: float | None,
    max_tokens: int | None,
    generation: GenerationSettings,
    dtype: str | None = None,
) -> dict[str, Any]:
    """A chat model's description.

    Args:
        model: its name (the endpoint's model, or the hub id / directory loaded).
        in_process: loaded here (``--llm hf:...``) rather than served at an endpoint.
        temperature, max_tokens: the values sent with each request, defaults resolved.
        generation: the user's settings (their seed and extra body are sent as given).
        dtype: the in-process model's dtype name (``bfloat16``); ``None``: unknown, left out.
    """
    extra = generation.extra_body
    description: dict[str, Any] = {
        "--llm": f"{HF_PREFIX}{model}" if in_process else None,
        "--llm-model": None if in_process else model,
        "--temperature": temperature,
        "--max-tokens": max_tokens,
        "--seed": generation.seed,
        "--llm-extra": json.loads(canonical_json(extra)) if extra else None,
    }
    if dtype is not None:
        description["--dtype"] = dtype
    return description


def sam3_description(
    *, model: str | None = None, url: str | None = None, dtype: str | None = None
) -> dict[str, Any]:
    """A segmenter's description: SAM 3 in process (``model``, the hub id or directory
    loaded, and its ``dtype`` name) or the service at ``url``. ``model`` or ``dtype``
    ``None`` in process: unknown, left out."""
    if url is not None:
        return {"--sam3": None, "--sam3-url": url.rstrip("/")}
    description: dict[str, Any] = {"--sam3-url": None}
    if model is not None:
        description["--sam3"] = model
    if dtype is not None:
        description["--dtype"] = dtype
    return description


def dtype_name(dtype: object) -> str:
    """``torch.bfloat16`` as ``bfloat16`` (the ``--dtype`` spelling)."""
    return str(dtype).removeprefix("torch.")
