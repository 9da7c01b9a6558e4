"""The evaluation datasets by name: the image ones and their titles; the video ones, their
splits, which cannot be scored here, and how the official "overall" figure is formed.

Kept apart from the loaders (:mod:`~sam3_agent.runs.evaluation.datasets`,
:mod:`~sam3_agent.runs.evaluation.video.datasets`) and free of heavy imports, so that
``eval --help`` can list the names and a split without public ground truth is refused before
anything loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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
    """What a caller needs to know of one dataset before loading it.

    Attributes:
        title: as papers print it.
        splits: the splits the loader reads; the first is the default.
        no_public_ground_truth: split -> why it cannot be scored here and where it can.
        overall_from: tags whose means the official "overall" averages (ReVOS), or None:
            the overall figure is the mean over every sample.
    """

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


def is_video_dataset(name: str) -> bool:
    """Whether ``name`` is one of :data:`VIDEO_DATASETS`."""
    return name in VIDEO_DATASETS


def default_split(name: str) -> str | None:
    """The split a video dataset is evaluated on when none is named; None for other names."""
    info = VIDEO_DATASETS.get(name)
    return None if info is None else info.default_split


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
    """Refuse, by setting, what does not apply to ``dataset``: the image options and the
    frame selection for a video dataset, the video settings (not at their defaults) for an
    image one.
    """
    given: list[tuple[object, object, str]] = [
        (frames, FrameSelection(), n) for n in FRAME_SETTINGS
    ]
    given += [
        (options, VideoOptions(), n) for n in ("frames_shown", "check_frames", "uncertain_looks")
    ]
    changed = [
        name for value, default, name in given if getattr(value, name) != getattr(default, name)
    ]
    if video_cache_mb != DEFAULT_VIDEO_CACHE_MB:
        changed.append("video_cache_mb")
    if not is_video_dataset(dataset):
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
