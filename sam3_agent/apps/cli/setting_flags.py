"""Library messages name a setting in backticks (`` `engine='ray'` ``); :func:`as_flags`
shows it as the flag a CLI user types (``--engine ray``)."""

from __future__ import annotations

import re

RENAMED = {
    "max_image_pixels": "--max-pixels",
    "prompts_dir": "--prompts",
    "context_reserve_tokens": "--reserve-tokens",
    "start_s": "--start",
    "end_s": "--end",
    "sam3_cache_size": "--cache-size",
    "tool_set": "--tools",
}
"""Settings whose flag is not their name with dashes (``AgentConfig``, ``FrameSelection``,
``BackendSpec`` fields)."""

SETTING_OF = {flag[2:].replace("-", "_"): setting for setting, flag in RENAMED.items()}
"""The setting a renamed flag's value fills (its parameter ``max_pixels``: ``max_image_pixels``)."""

SAME_NAME = frozenset(
    {
        # BackendSpec
        "sam3", "sam3_url", "sam3_token", "device", "dtype", "llm", "llm_url", "llm_model",
        "llm_api_key", "llm_timeout", "temperature", "max_tokens", "seed", "llm_extra",
        "memory_check", "tool_protocol", "cache", "replay", "video_cache_mb",
        # AgentConfig
        "max_rounds", "max_corrections", "check_concurrency", "score_threshold",
        "max_image_side", "context_policy", "max_context_tokens",
        # EngineOptions
        "concurrency", "engine", "ray_address", "workers", "gpus_per_worker",
        # FrameSelection, VideoOptions
        "stride", "max_frames", "fps", "frames_shown", "check_frames", "uncertain_looks",
        # arguments of the evaluation and batch runs
        "out", "dataset", "preset", "split", "images", "all_texts", "limit", "shard", "mode",
        "query", "export",
        # arguments of one request (run, track)
        "resume", "overwrite",
    }
)  # fmt: skip
"""Settings whose flag is their name with dashes (``llm_url``: ``--llm-url``)."""

_NAMED = re.compile(r"`([a-z][a-z0-9_]*)(?:=([^`]*))?`")


def flag_of(setting: str) -> str | None:
    """The flag of ``setting``; ``None`` for a setting no command takes."""
    if setting in SAME_NAME:
        return "--" + setting.replace("_", "-")
    return RENAMED.get(setting)


def as_flags(message: str) -> str:
    """``message`` with each backticked setting (and its value) written as its flag."""

    def flag(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        option = flag_of(name)
        if option is None:
            return match.group()
        if value is None or value == "True":
            return option
        if value == "False":
            return "--no-" + option[2:]
        if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        return f"{option} {value}"

    return _NAMED.sub(flag, message)
