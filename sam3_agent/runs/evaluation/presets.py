"""Named evaluation settings: ``sam3-agent eval --preset reasonseg-val`` and the like.

A preset names the dataset, split and mode of one of the SAM 3 paper's agent evaluations,
or of a video benchmark scored with J, F and J&F (evaluated with the video agent).
The agent settings are this package's defaults (:class:`sam3_agent.values.config.AgentConfig`),
which follow the original SAM 3 Agent's (score threshold 0.5, overlap removal above 0.3 of
the smaller mask); the paper states no other. A run directory records the preset's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sam3_agent.runs.evaluation.catalog import default_split
from sam3_agent.values.errors import UserError

Mode = Literal["agent", "sam3-only"]


@dataclass(frozen=True)
class Preset:
    """One evaluation: which data, which split, which mode; ``description`` is one line for
    ``--help`` and the README."""

    name: str
    dataset: str
    split: str
    mode: Mode
    description: str


_ALL = (
    Preset("reasonseg-val", "reasonseg", "val", "agent", "ReasonSeg val (200 images), gIoU/cIoU"),
    Preset(
        "reasonseg-test",
        "reasonseg",
        "test",
        "agent",
        "ReasonSeg test (779 images; short and long queries), gIoU/cIoU",
    ),
    Preset("refcoco-val", "refcoco", "val", "agent", "RefCOCO val (UNC split), cIoU"),
    Preset("refcoco+-val", "refcoco+", "val", "agent", "RefCOCO+ val (UNC split), cIoU"),
    Preset("refcocog-val", "refcocog", "val", "agent", "RefCOCOg val (UMD split), cIoU"),
    Preset("grefcoco-val", "grefcoco", "val", "agent", "gRefCOCO val, gIoU/cIoU, N-acc"),
    Preset(
        "reasonseg-val-sam3-only",
        "reasonseg",
        "val",
        "sam3-only",
        "ReasonSeg val with SAM 3 alone (the query as phrase)",
    ),
    Preset(
        "reasonseg-test-sam3-only",
        "reasonseg",
        "test",
        "sam3-only",
        "ReasonSeg test with SAM 3 alone (the query as phrase)",
    ),
    Preset(
        "ref-davis17-valid",
        "ref-davis17",
        "valid",
        "agent",
        "Ref-DAVIS17 valid (video), J, F and J&F",
    ),
    Preset(
        "mevis-valid_u",
        "mevis",
        "valid_u",
        "agent",
        "MeViS valid_u (video; valid is scored by the official server), J, F and J&F",
    ),
    Preset(
        "revos-valid",
        "revos",
        "valid",
        "agent",
        "ReVOS valid (video; referring / reasoning, overall their mean), J, F and J&F",
    ),
    Preset(
        "reasonvos-valid",
        "reasonvos",
        "valid",
        "agent",
        "ReasonVOS (video), J, F and J&F",
    ),
)

PRESETS: dict[str, Preset] = {p.name: p for p in _ALL}


def get_preset(name: str) -> Preset:
    """The preset called ``name``."""
    preset = PRESETS.get(name)
    if preset is None:
        raise UserError(f"unknown `preset` {name!r}; choose one of {', '.join(PRESETS)}")
    return preset


def apply_preset(
    preset: Preset | None, *, dataset: str | None, split: str | None, mode: str | None
) -> tuple[str, str, str]:
    """``(dataset, split, mode)`` from a preset and the flags given beside it.

    A flag may repeat the preset's value or, for ``mode``, change it (the baseline of a
    preset's dataset); a different dataset or split is a contradiction.
    """
    if preset is None:
        if dataset is None:
            raise UserError("say what to evaluate: `dataset='NAME'` (or `preset='NAME'`)")
        return dataset, split or default_split(dataset) or "val", mode or "agent"
    for name, given, fixed in (
        ("dataset", dataset, preset.dataset),
        ("split", split, preset.split),
    ):
        if given is not None and given != fixed:
            raise UserError(
                f"`preset={preset.name!r}` evaluates {name} {fixed!r}; `{name}` {given!r} "
                "contradicts it (drop one of them)"
            )
    return preset.dataset, preset.split, mode or preset.mode
