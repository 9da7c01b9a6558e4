"""Will the in-process models fit? Before any download, each needs ``parameters x bytes x
(1 + MARGIN_FRACTION) + MARGIN_BYTES`` (parameters counted from ``config.json`` on ``meta``, or
:data:`KNOWN_PARAMETERS`); one process's needs are summed against what its device has free."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sam3_agent.backends.hub import cached_file
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

GB = 1e9
GIB = 1024**3

MARGIN_FRACTION = 0.20
MARGIN_BYTES = 1 * GIB

BYTES_PER_PARAMETER = {"float32": 4, "bfloat16": 2, "float16": 2}

KNOWN_PARAMETERS: dict[str, int] = {
    "facebook/sam3": 840_000_000,
    "Qwen/Qwen2.5-VL-3B-Instruct": 3_755_000_000,
    "Qwen/Qwen2.5-VL-7B-Instruct": 8_292_000_000,
    "Qwen/Qwen3-VL-2B-Instruct": 2_128_000_000,
    "Qwen/Qwen3-VL-4B-Instruct": 4_438_000_000,
    "Qwen/Qwen3-VL-8B-Instruct": 8_767_000_000,
    "Qwen/Qwen3-VL-8B-Thinking": 8_767_000_000,
}
"""For hub ids whose ``config.json`` is not cached: the hub's safetensors counts; SAM 3 (and
its video model below) from ``Sam3Model(Sam3Config())``."""
KNOWN_VIDEO_PARAMETERS: dict[str, int] = {"facebook/sam3": 859_921_848}

GPU_DEFAULT_MLLM = "Qwen/Qwen3-VL-8B-Instruct"  # the SAM 3 paper's open agent model class

SMALL_DEFAULT_MLLMS = ("Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-2B-Instruct")

Kind = Literal["mllm", "sam3", "sam3_video"]


@dataclass(frozen=True)
class MemoryReading:
    device: str
    available: int  # bytes
    total: int


@dataclass(frozen=True)
class Footprint:
    """What one model needs on its device; ``extra``: bytes beyond weights and margins."""

    name: str
    parameters: int
    dtype: str
    source: str
    extra: int = 0

    @property
    def weights(self) -> int:
        return self.parameters * BYTES_PER_PARAMETER[self.dtype]

    @property
    def need(self) -> int:
        return int(self.weights * (1 + MARGIN_FRACTION)) + MARGIN_BYTES + self.extra

    def describe(self) -> str:
        return f"{self.name} ≈{self.need / GB:.1f} GB in {self.dtype}"


@dataclass(frozen=True)
class DefaultChoice:
    model: str
    reason: str


def read_memory(device: torch.device) -> MemoryReading:
    if device.type == "cuda":
        import torch

        free, total = torch.cuda.mem_get_info(device)
        return MemoryReading(str(device), int(free), int(total))
    return _ram()


def _ram() -> MemoryReading:
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                name, _, rest = line.partition(":")
                fields[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        fields = {}
    if "MemAvailable" in fields and "MemTotal" in fields:
        return MemoryReading("cpu", fields["MemAvailable"], fields["MemTotal"])
    page = os.sysconf("SC_PAGE_SIZE")
    return MemoryReading(
        "cpu", os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    )


def config_path(source: str) -> Path | None:
    """``config.json`` of a local directory, or of a hub id in the hub cache; no download."""
    local = Path(source).expanduser()
    if local.is_dir():
        candidate = local / "config.json"
        return candidate if candidate.is_file() else None
    return cached_file(source)


def count_parameters(config_file: Path, kind: Kind) -> int:
    """Parameters of the model ``config_file`` describes, built on the ``meta`` device."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForImageTextToText

    with open(config_file, encoding="utf-8") as f:
        json.load(f)  # a readable JSON file, or ValueError here
    config = AutoConfig.from_pretrained(config_file.parent, local_files_only=True)
    builder = AutoModelForImageTextToText if kind == "mllm" else AutoModel
    with torch.device("meta"):
        model = builder.from_config(config)
    return sum(p.numel() for p in model.parameters())


def footprint(
    source: str, kind: Kind, dtype: str, fetched: Path | None = None, *, extra: int = 0
) -> Footprint | None:
    """The estimate from a local or cached ``config.json``, else the known table, else
    ``fetched`` (the hub's config); ``None`` (not refused) with no count."""
    path = config_path(source)
    known = (KNOWN_VIDEO_PARAMETERS if kind == "sam3_video" else KNOWN_PARAMETERS).get(source)
    if path is None and known is None:
        path = fetched
    if path is not None:
        try:
            count = count_parameters(path, kind)
            return Footprint(source, count, dtype, "config.json", extra)
        except (OSError, ValueError, KeyError) as e:
            logger.warning("cannot count the parameters of %s from %s: %s", source, path, e)
    if known is not None:
        return Footprint(source, known, dtype, "known models table", extra)
    logger.info("no memory estimate for %s (no config.json here, not a known model)", source)
    return None


def check_fits(footprints: list[Footprint], reading: MemoryReading, ways_out: str) -> None:
    """Raise UserError, with the numbers and ``ways_out``, when the summed need does not fit."""
    need = sum(f.need for f in footprints)
    if not footprints or need <= reading.available:
        return
    models = " + ".join(f.describe() for f in footprints)
    raise UserError(
        f"not enough memory on {reading.device}: need ≈{need / GB:.1f} GB ({models}), "
        f"{reading.available / GB:.1f} GB of {reading.total / GB:.1f} GB available; "
        f"{ways_out}"
    )


def choose_default_mllm(
    reading: MemoryReading, dtype: str, others: list[Footprint] | None = None
) -> DefaultChoice:
    """:data:`GPU_DEFAULT_MLLM` on a CUDA device with room for it beside ``others``, else the
    largest of :data:`SMALL_DEFAULT_MLLMS` that fits, else the smallest (the check explains)."""
    taken = sum(f.need for f in others or [])
    on_gpu = reading.device.startswith("cuda")
    free = f"{reading.available / GB:.1f} GB available"
    if on_gpu:
        big = Footprint(GPU_DEFAULT_MLLM, KNOWN_PARAMETERS[GPU_DEFAULT_MLLM], dtype, "table")
        if big.need + taken <= reading.available:
            return DefaultChoice(
                GPU_DEFAULT_MLLM,
                f"{reading.device} has {free}: the paper's open model class fits",
            )
        why = f"{reading.device} has {free}, under the ≈{(big.need + taken) / GB:.0f} GB "
        why += "Qwen3-VL 8B needs"
    else:
        why = f"no CUDA device ({free} RAM)"
    for model in SMALL_DEFAULT_MLLMS:
        small = Footprint(model, KNOWN_PARAMETERS[model], dtype, "table")
        if small.need + taken <= reading.available:
            return DefaultChoice(model, f"{why}; a smaller Qwen3-VL in {dtype} fits")
    smallest = SMALL_DEFAULT_MLLMS[-1]
    return DefaultChoice(smallest, f"{why}; even the smallest default may not fit")


def ways_out(mllm_here: bool, sam3_here: bool, dtype: str, device_type: str) -> str:
    ways = []
    if mllm_here:
        ways += [
            "an OpenAI-compatible server (`llm_url=URL` `llm_model=NAME`)",
            f"a smaller `llm='hf:{SMALL_DEFAULT_MLLMS[-1]}'`",
        ]
    if sam3_here:
        ways.append("a SAM 3 service (`sam3_url`)")
    if dtype == "float32":
        slower = ", slower on this CPU" if device_type == "cpu" else ""
        ways.append(f"`dtype='bfloat16'` (half the memory{slower})")
    ways.append("`memory_check=False` if the estimate is wrong")
    return "ways out: " + ", ".join(ways)
