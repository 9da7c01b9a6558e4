"""The evaluation datasets by name and the presets of the SAM 3 paper's evaluations, free of
heavy imports so that ``eval --help`` lists them and bad settings are refused at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sam3_agent.backends.segmenters import DEFAULT_VIDEO_CACHE_MB
from sam3_agent.values.config import FrameSelection, VideoOptions
from sam3_agent.values.errors import UserError

IMAGE_DATASETS: dict[str, str] = {
    "reasonseg": "ReasonSeg",
    "refcoco": "RefCOCO",
    "refcoco+": "RefCOCO+",
    "refcocog": "RefCOCOg",
    "grefcoco": "gRefCOCO",
}
"""Every image dataset by name, with its title as papers print it."""


@dataclass(frozen=True)
class VideoDatasetInfo:
    """One video dataset: ``splits`` (the first the default); ``no_public_ground_truth``: split
    -> why it cannot be scored here; ``overall_from``: tags whose means the official overall
    averages (None: the mean over every sample)."""

    name: str
    title: str
    splits: tuple[str, ...]
    no_public_ground_truth: Mapping[str, str] = field(default_factory=dict)
    overall_from: tuple[str, ...] | None = None

    @property
    def default_split(self) -> str:
        return self.splits[0]


_YTVOS_SERVER = (
    "Ref-YouTube-VOS valid has no public ground truth: submit predictions to the official "
    "CodaLab server (https://competitions.codalab.org/competitions/29139)"
)
_MEVIS_SERVER = (
    "MeViS valid has no public ground truth: submit predictions to the official CodaLab "
    "server (https://codalab.lisn.upsaclay.fr/competitions/15094); valid_u has public masks"
)

VIDEO_DATASETS: dict[str, VideoDatasetInfo] = {
    "ref-youtube-vos": VideoDatasetInfo(
        "ref-youtube-vos",
        "Ref-YouTube-VOS",
        ("valid", "train"),
        {"valid": _YTVOS_SERVER},
    ),
    "ref-davis17": VideoDatasetInfo("ref-davis17", "Ref-DAVIS17", ("valid", "train")),
    "mevis": VideoDatasetInfo(
        "mevis", "MeViS", ("valid_u", "valid", "train"), {"valid": _MEVIS_SERVER}
    ),
    "revos": VideoDatasetInfo(
        "revos", "ReVOS", ("valid", "train"), overall_from=("referring", "reasoning")
    ),
    "reasonvos": VideoDatasetInfo("reasonvos", "ReasonVOS", ("valid",)),
}
"""Every video dataset by name."""


def video_split(dataset: str, split: str | None) -> tuple[VideoDatasetInfo, str]:
    """The video dataset's info and the split named (its default when None)."""
    info = VIDEO_DATASETS.get(dataset)
    if info is None:
        raise UserError(
            f"unknown video dataset {dataset!r}; choose one of {', '.join(VIDEO_DATASETS)}"
        )
    split = info.default_split if split is None else split
    if split not in info.splits:
        raise UserError(
            f"{info.title} has no split {split!r}; choose one of {', '.join(info.splits)}"
        )
    return info, split


def dataset_title(name: str) -> str:
    """``name`` as papers print it (an unknown name as it is)."""
    info = VIDEO_DATASETS.get(name)
    return info.title if info is not None else IMAGE_DATASETS.get(name, name)


FRAME_SETTINGS = ("stride", "max_frames", "start_s", "end_s", "fps")
"""The frame selection settings of ``track``: ``eval`` tracks all of a sample's frames."""


def check_options(
    dataset: str, *, images: Path | None, all_texts: bool, mode: str, frames: FrameSelection,
    options: VideoOptions, video_cache_mb: int,
) -> None:  # fmt: skip
    """Refuse, by setting, what does not apply to ``dataset`` (image or video settings)."""
    given: list[tuple[object, object, str]] = [
        (frames, FrameSelection(), n) for n in FRAME_SETTINGS
    ]
    given += [
        (options, VideoOptions(), n) for n in ("frames_shown", "check_frames", "uncertain_looks")
    ]
    changed = [n for value, default, n in given if getattr(value, n) != getattr(default, n)]
    if video_cache_mb != DEFAULT_VIDEO_CACHE_MB:
        changed.append("video_cache_mb")
    if dataset not in VIDEO_DATASETS:
        if changed:
            raise UserError(f"`{changed[0]}` applies to video datasets")
        return
    if images is not None:
        raise UserError("`images` applies to the refer datasets (COCO images), not to videos")
    if all_texts:
        raise UserError("`all_texts` applies to reasonseg only")
    if mode != "agent":
        raise UserError(
            f"`mode={mode}` applies to image datasets; videos are evaluated with the agent"
        )
    for name in changed:
        if name in FRAME_SETTINGS:
            raise UserError(
                f"`{name}` applies to track: eval tracks every frame of a sample's folder, as "
                "the benchmarks score every annotated frame"
            )


Mode = Literal["agent", "sam3-only"]


@dataclass(frozen=True)
class Preset:
    """One of the paper's evaluations (``eval --preset``) with this package's agent defaults,
    which follow the original SAM 3 Agent's; ``description`` is one line for ``--help``."""

    name: str
    dataset: str
    split: str
    mode: Mode
    description: str


_JF = "J, F and J&F"
_PRESET_ROWS: tuple[tuple[str, str, Mode, str], ...] = (
    ("reasonseg", "val", "agent", "ReasonSeg val (200 images), gIoU/cIoU"),
    (
        "reasonseg",
        "test",
        "agent",
        "ReasonSeg test (779 images; short and long queries), gIoU/cIoU",
    ),
    ("refcoco", "val", "agent", "RefCOCO val (UNC split), cIoU"),
    ("refcoco+", "val", "agent", "RefCOCO+ val (UNC split), cIoU"),
    ("refcocog", "val", "agent", "RefCOCOg val (UMD split), cIoU"),
    ("grefcoco", "val", "agent", "gRefCOCO val, gIoU/cIoU, N-acc"),
    ("reasonseg", "val", "sam3-only", "ReasonSeg val with SAM 3 alone (the query as phrase)"),
    ("reasonseg", "test", "sam3-only", "ReasonSeg test with SAM 3 alone (the query as phrase)"),
    ("ref-davis17", "valid", "agent", f"Ref-DAVIS17 valid (video), {_JF}"),
    (
        "mevis",
        "valid_u",
        "agent",
        f"MeViS valid_u (video; valid is scored by the official server), {_JF}",
    ),
    (
        "revos",
        "valid",
        "agent",
        f"ReVOS valid (video; referring / reasoning, overall their mean), {_JF}",
    ),
    ("reasonvos", "valid", "agent", f"ReasonVOS (video), {_JF}"),
)
PRESETS: dict[str, Preset] = {
    name: Preset(name, dataset, split, mode, description)
    for dataset, split, mode, description in _PRESET_ROWS
    # The name says what it evaluates: ``<dataset>-<split>``, ``-sam3-only`` for SAM 3 alone.
    for name in [f"{dataset}-{split}" + ("-sam3-only" if mode == "sam3-only" else "")]
}


def get_preset(name: str) -> Preset:
    preset = PRESETS.get(name)
    if preset is None:
        raise UserError(f"unknown `preset` {name!r}; choose one of {', '.join(PRESETS)}")
    return preset


def apply_preset(
    preset: Preset | None, *, dataset: str | None, split: str | None, mode: str | None
) -> tuple[str, str, str]:
    """``(dataset, split, mode)`` from a preset and the settings beside it (which may repeat it
    or change its ``mode``)."""
    if preset is None:
        if dataset is None:
            raise UserError("say what to evaluate: `dataset='NAME'` (or `preset='NAME'`)")
        info = VIDEO_DATASETS.get(dataset)
        return dataset, split or (info.default_split if info else "val"), mode or "agent"
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
