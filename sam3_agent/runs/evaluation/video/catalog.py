"""The video datasets by name: their splits, which cannot be scored here, and how the
official "overall" figure is formed.

Kept apart from the loaders (:mod:`~sam3_agent.runs.evaluation.video.datasets`) and free of
heavy imports, so that ``eval --help`` can list the names and a split without public ground
truth is refused before anything loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["VIDEO_DATASETS", "VideoDatasetInfo", "default_split", "is_video_dataset"]


@dataclass(frozen=True)
class VideoDatasetInfo:
    """What a caller needs to know of one dataset before loading it.

    Attributes:
        name: as ``load_video_samples`` takes it.
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


def is_video_dataset(name: str) -> bool:
    """Whether ``name`` is one of :data:`VIDEO_DATASETS`."""
    return name in VIDEO_DATASETS


def default_split(name: str) -> str | None:
    """The split a video dataset is evaluated on when none is named; None for other names."""
    info = VIDEO_DATASETS.get(name)
    return None if info is None else info.default_split
