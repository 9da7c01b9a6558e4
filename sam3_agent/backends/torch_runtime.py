"""Device and dtype choices shared by the in-process backends (SAM 3 and the MLLM)."""

from __future__ import annotations

import os

import torch

from sam3_agent.errors import UserError

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def resolve_device(device: str) -> torch.device:
    """``auto`` is the first CUDA device when there is one, else the CPU.

    Raises:
        UserError: not a torch device name, or CUDA asked for where torch sees none.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise UserError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from e
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {device!r} asked for, but torch sees no CUDA device")
    return resolved


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 on CUDA and float32 elsewhere.

    Raises:
        UserError: ``dtype`` is not one of auto, float32, bfloat16, float16.
    """
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; use auto, {', '.join(DTYPES)}")
    return DTYPES[dtype]


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set now (huggingface_hub reads it only at import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
