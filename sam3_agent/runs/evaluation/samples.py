"""What a dataset loader gives: samples whose ground truth is decoded only when asked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sam3_agent.values.detections import BoolArray
from sam3_agent.values.errors import DatasetError, ImageLoadError
from sam3_agent.values.images import image_size_as_displayed
from sam3_agent.values.text import one_line


@dataclass(frozen=True)
class GroundTruth:
    """A sample's ground truth at the image's full resolution: ``mask`` the ``(H, W)`` bool
    target pixels (none for a no-target sample), ``ignore`` those left out of scoring."""

    mask: BoolArray
    ignore: BoolArray | None = None

    @property
    def image_size(self) -> tuple[int, int]:
        return int(self.mask.shape[0]), int(self.mask.shape[1])


class GroundTruthSource(Protocol):
    """Decodes a sample's ground truth on demand."""

    def load(self) -> GroundTruth: ...


@dataclass(frozen=True)
class Sample:
    """One (image, query) pair: ``id`` unique within the dataset; ``no_target``: the right
    answer is no mask; ``exif_orientation``: the masks are in the displayed frame."""

    id: str
    image_path: Path
    query: str
    split: str
    tags: tuple[str, ...] = ()
    no_target: bool = False
    exif_orientation: bool = True
    gt_source: GroundTruthSource | None = field(default=None, compare=False, repr=False)

    def load_gt(self) -> GroundTruth:
        """The ground truth, decoded now (not cached: callers hold it as long as they need)."""
        if self.gt_source is None:
            raise DatasetError(f"sample {self.id}: no ground truth attached")
        return self.gt_source.load()


def read_json(path: Path, sample: str | None = None) -> Any:
    """The JSON document at ``path``; :class:`DatasetError` naming it if unreadable."""
    where = f"{path}" + (f" (sample {sample})" if sample else "")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DatasetError(f"{where}: cannot read: {e}") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # Some published ReasonSeg annotations are saved as Windows-1252.
        text = raw.decode("cp1252", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{where}: invalid JSON: {e}") from e


def image_size(path: Path, sample: str) -> tuple[int, int]:
    """``(height, width)`` of an image as displayed, from its header; :class:`DatasetError`
    naming it if unreadable."""
    try:
        return image_size_as_displayed(path)
    except ImageLoadError as e:
        raise DatasetError(f"{path} (sample {sample}): {one_line(e)}") from e


def first_dir(*candidates: Path) -> Path | None:
    """The first of ``candidates`` that is a directory (datasets are unpacked in several ways)."""
    return next((c for c in candidates if c.is_dir()), None)
