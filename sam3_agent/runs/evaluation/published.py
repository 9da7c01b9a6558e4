"""Published figures that ``report`` sets beside a run's, marked "published": only those
whose source we can name (why each is in or out: docs/evaluation.md); percentages as printed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Metric = Literal["gIoU", "cIoU", "J", "F", "J&F"]

SAM3_PAPER = "SAM 3 paper (arXiv 2511.16719), SAM 3 Agent, Tables 39/41"
AGENTRVOS_PAPER = "AgentRVOS (arXiv 2603.23489)"


@dataclass(frozen=True)
class PublishedResult:
    """One published figure, ``value`` in percent: ``match`` the normalised name prefixes of
    runs of its ``model`` (empty when unstated, as the ``split`` may be); ``tag`` a subset."""

    model: str
    match: tuple[str, ...]
    dataset: str
    split: str
    metric: Metric
    value: float
    source: str
    tag: str | None = None
    method: str = "SAM 3 Agent"

    @property
    def label(self) -> str:
        if not self.model:
            return f"{self.method} (published)"
        return f"{self.method}, {self.model} (published)"


_QWEN25, _QWEN3, _GEMINI = "Qwen2.5-VL 7B", "Qwen3-VL 8B Thinking", "Gemini 2.5 Pro"
_PREFIX = {_QWEN25: "qwen2.5-vl-7b", _QWEN3: "qwen3-vl-8b-thinking", _GEMINI: "gemini-2.5-pro"}

_ROWS: tuple[tuple[str, str, str, Metric, float], ...] = (
    (_QWEN25, "reasonseg", "val", "gIoU", 62.2),
    (_QWEN25, "reasonseg", "test", "gIoU", 63.0),
    (_QWEN3, "reasonseg", "val", "gIoU", 68.5),
    (_QWEN3, "reasonseg", "test", "gIoU", 70.2),
    (_GEMINI, "reasonseg", "val", "gIoU", 77.0),
    (_GEMINI, "reasonseg", "test", "gIoU", 74.0),
    (_GEMINI, "refcoco+", "val", "cIoU", 67.3),
)
PUBLISHED: tuple[PublishedResult, ...] = tuple(
    PublishedResult(model, (_PREFIX[model],), dataset, split, metric, value, SAM3_PAPER)
    for model, dataset, split, metric, value in _ROWS
)


def normalise_model(name: str) -> str:
    """``"Qwen/Qwen2.5-VL-7B-Instruct"`` -> ``"qwen2.5-vl-7b-instruct"``."""
    last = name.strip().rsplit("/", 1)[-1].lower()
    return re.sub(r"[\s_]+", "-", last)


def matches(row: PublishedResult, model: str | None) -> bool:
    """Whether a run of ``model`` uses the MLLM of ``row``."""
    if not model:
        return False
    normal = normalise_model(model)
    return any(normal.startswith(prefix) for prefix in row.match)


# AgentRVOS (arXiv 2603.23489), the training-free SAM 3 + MLLM method closest to the video
# agent: J&F only, no MLLM named per figure (so no run matches it), MeViS's split not stated.
_VIDEO_ROWS = (("mevis", "", 73.1), ("reasonvos", "valid", 75.5), ("revos", "valid", 66.3))
VIDEO_PUBLISHED: tuple[PublishedResult, ...] = tuple(
    PublishedResult("", (), dataset, split, "J&F", value, AGENTRVOS_PAPER, method="AgentRVOS")
    for dataset, split, value in _VIDEO_ROWS
)


def for_dataset(dataset: str) -> list[PublishedResult]:
    return [r for r in (*PUBLISHED, *VIDEO_PUBLISHED) if r.dataset == dataset]
