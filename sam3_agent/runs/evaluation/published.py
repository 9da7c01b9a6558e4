"""Published results that ``report`` sets beside a run's, marked "published".

Only figures whose source we can name are here. From the SAM 3 paper (Carion et al.,
"SAM 3: Segment Anything with Concepts", arXiv 2511.16719), its SAM 3 Agent tables
(Tables 39 and 41): ReasonSeg gIoU with three MLLMs, and RefCOCO+ val cIoU with Gemini 2.5
Pro. Deliberately left out: LISA-7B and the SAM 3-only baseline, whose figures we could not
confirm against their sources here; add them with their source when checked.

Values are percentages as printed in the paper. A run's model matches a published row when
its normalised name (lower case, no organisation prefix, spaces as ``-``) starts with one
of the row's ``match`` prefixes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Metric = Literal["gIoU", "cIoU", "J", "F", "J&F"]

SAM3_PAPER = "SAM 3 paper (arXiv 2511.16719), SAM 3 Agent, Tables 39/41"


@dataclass(frozen=True)
class PublishedResult:
    """One published figure.

    Attributes:
        model: the MLLM as the paper names it (empty when the source does not say).
        match: normalised model-name prefixes of runs that use this model.
        dataset, split: as ``eval`` names them (split empty when the source does not say);
            ``tag`` a subset (``None``: overall).
        metric: ``gIoU`` or ``cIoU`` (images); ``J``, ``F`` or ``J&F`` (videos).
        value: the figure, in percent.
    """

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


_QWEN25_7B = ("Qwen2.5-VL 7B", ("qwen2.5-vl-7b",))
_QWEN3_8B_THINKING = ("Qwen3-VL 8B Thinking", ("qwen3-vl-8b-thinking",))
_GEMINI_25_PRO = ("Gemini 2.5 Pro", ("gemini-2.5-pro",))


def _row(
    model: tuple[str, tuple[str, ...]], dataset: str, split: str, metric: Metric, value: float
) -> PublishedResult:
    return PublishedResult(model[0], model[1], dataset, split, metric, value, SAM3_PAPER)


PUBLISHED: tuple[PublishedResult, ...] = (
    _row(_QWEN25_7B, "reasonseg", "val", "gIoU", 62.2),
    _row(_QWEN25_7B, "reasonseg", "test", "gIoU", 63.0),
    _row(_QWEN3_8B_THINKING, "reasonseg", "val", "gIoU", 68.5),
    _row(_QWEN3_8B_THINKING, "reasonseg", "test", "gIoU", 70.2),
    _row(_GEMINI_25_PRO, "reasonseg", "val", "gIoU", 77.0),
    _row(_GEMINI_25_PRO, "reasonseg", "test", "gIoU", 74.0),
    _row(_GEMINI_25_PRO, "refcoco+", "val", "cIoU", 67.3),
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


def for_dataset(dataset: str) -> list[PublishedResult]:
    return [r for r in PUBLISHED if r.dataset == dataset]
