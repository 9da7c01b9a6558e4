"""The record of one batch request, as the run's results store keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sam3_agent.runs.jobs.records import JobRecord


@dataclass(frozen=True, kw_only=True)
class RequestResult(JobRecord):
    """One finished request: a :class:`~sam3_agent.runs.jobs.records.JobRecord` and its masks.

    Attributes:
        masks: the selected masks; ``mask_pixels`` the pixels of their union (whose COCO
            RLE is ``prediction``). For a video: the selected tracks, and the pixels of
            their union summed over the frames used (no ``prediction``: the tracks are in
            the request's ``result.json``).
        media: ``image`` or ``video`` (``image_path`` is then the video's path).
        extra: JSON-safe details (mask scores, usage breakdown, phrases tried; for a video
            also ``frames``, the number used, and ``video_note``, why a damaged file gave
            fewer).
    """

    masks: int = 0
    mask_pixels: int = 0
    media: str = "image"

    @classmethod
    def _upgrade(cls, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Also a record stored before batches had their own record type (an evaluation
        sample's record with the masks in ``extra`` and their pixels as ``pred_area``), so
        that those run directories still resume."""
        data = dict(doc)
        if "mask_pixels" not in doc:
            extra = dict(doc.get("extra") or {})
            data["masks"] = int(extra.pop("masks", 0))
            data["mask_pixels"] = int(doc.get("pred_area", 0))
            data["extra"] = extra
        return data
