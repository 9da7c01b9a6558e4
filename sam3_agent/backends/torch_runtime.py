"""Device and dtype choices of the in-process backends; the name checks need no torch."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    import torch

DTYPE_NAMES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")

_DEVICE = re.compile(r"^(auto|cpu|mps|xpu|cuda|cuda:\d+)$")


def check_device_name(device: str) -> None:
    """Refuse what cannot be a device name: auto, cpu, mps, xpu, cuda, cuda:N."""
    if not _DEVICE.match(device):
        raise UserError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")


def check_dtype_name(dtype: str) -> None:
    if dtype not in DTYPE_NAMES:
        raise UserError(f"unknown dtype {dtype!r}; use {', '.join(DTYPE_NAMES)}")


def resolve_device(device: str) -> torch.device:
    """``auto`` is the first CUDA device when there is one, else the CPU."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise UserError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from e
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {device!r} asked for, but torch sees no CUDA device")
    return resolved


def cpu_supports_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 natively (as oneDNN reports it; else emulated)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def auto_dtype_name(device_type: str) -> str:
    """``auto``: bfloat16 on CUDA and on a CPU that computes it natively, else float32."""
    if device_type == "cuda" or (device_type == "cpu" and cpu_supports_bfloat16()):
        return "bfloat16"
    return "float32"


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    import torch

    check_dtype_name(dtype)
    if dtype == "auto":
        dtype = auto_dtype_name(device.type)
    resolved: torch.dtype = getattr(torch, dtype)  # each name in DTYPE_NAMES is torch's own
    return resolved
