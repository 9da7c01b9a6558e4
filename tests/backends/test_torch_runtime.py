"""Device and dtype choices: names checked without torch, ``auto`` per device, and the
tiny models' outputs in bfloat16 against float32 on the CPU (what ``--dtype auto`` costs
in agreement where the CPU computes bfloat16 natively)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sam3_agent.backends import torch_runtime
from sam3_agent.backends.torch_runtime import (
    auto_dtype_name,
    check_device_name,
    check_dtype_name,
    resolve_dtype,
)
from sam3_agent.values.errors import UserError


@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:0", "cuda:12", "mps"])
def test_device_names_accepted(name: str) -> None:
    check_device_name(name)


@pytest.mark.parametrize("name", ["", "gpu", "cuda:", "cuda:x", "CPU", "cpu "])
def test_device_names_refused(name: str) -> None:
    with pytest.raises(UserError, match="unknown device"):
        check_device_name(name)


def test_dtype_names() -> None:
    for name in ("auto", "float32", "bfloat16", "float16"):
        check_dtype_name(name)
    with pytest.raises(UserError, match="unknown dtype"):
        check_dtype_name("fp8")


@pytest.mark.parametrize(("native", "expected"), [(True, "bfloat16"), (False, "float32")])
def test_auto_on_cpu_is_bfloat16_where_native(
    monkeypatch: pytest.MonkeyPatch, native: bool, expected: str
) -> None:
    monkeypatch.setattr(torch_runtime, "cpu_supports_bfloat16", lambda: native)
    assert auto_dtype_name("cpu") == expected
    assert resolve_dtype("auto", torch.device("cpu")) == getattr(torch, expected)
    assert auto_dtype_name("cuda") == "bfloat16"


def test_tiny_qwen_agrees_in_bfloat16(tiny_qwen_dir: Path) -> None:
    """Next-token distributions of the tiny Qwen2.5-VL in float32 vs bfloat16 on the CPU."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen_dir, dtype=torch.float32)
    half = AutoModelForImageTextToText.from_pretrained(tiny_qwen_dir, dtype=torch.bfloat16)
    ids = torch.randint(
        0, model.config.text_config.vocab_size, (1, 48), generator=torch.Generator().manual_seed(0)
    )
    with torch.inference_mode():
        p32 = model(input_ids=ids).logits.float().softmax(-1)
        p16 = half(input_ids=ids).logits.float().softmax(-1)
    # Total variation distance per position: 0 identical, 1 disjoint.
    tv = 0.5 * (p32 - p16).abs().sum(-1)
    assert tv.max().item() < 0.05, tv.max().item()
    assert (p32.argmax(-1) == p16.argmax(-1)).float().mean().item() >= 0.9


def test_tiny_sam3_agrees_in_bfloat16(tiny_sam3_dir: Path) -> None:
    """Mask logits of the tiny SAM 3 in float32 vs bfloat16 on the CPU: the masks they give
    (logit > 0) agree on almost every pixel."""
    from transformers import Sam3Model, Sam3Processor

    processor = Sam3Processor.from_pretrained(tiny_sam3_dir)
    image = torch.Generator().manual_seed(0)
    pixels = (torch.rand((96, 128, 3), generator=image) * 255).to(torch.uint8).numpy()
    outputs = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = Sam3Model.from_pretrained(tiny_sam3_dir, dtype=dtype).eval()
        inputs = processor(images=pixels, text="a cat", return_tensors="pt")
        inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
        with torch.inference_mode():
            outputs[dtype] = model(**inputs).pred_masks.float()
    a, b = outputs[torch.float32], outputs[torch.bfloat16]
    agreement = ((a > 0) == (b > 0)).float().mean().item()
    assert agreement >= 0.95, agreement
