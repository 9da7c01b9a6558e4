"""The record of one batch request, as the run's results store keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class RequestResult:
    """One finished request (a :class:`~sam3_agent.runs.jobs.base.JobResult`).

    Attributes:
        status: the agent's ``masks`` / ``no_mask`` / ``failed``. A request that raised (a
            backend failure, an unreadable image, any other error) is ``failed`` with
            ``infra_error`` set and the exception on one line in ``failure``;
            ``--retry-failed`` runs it again.
        masks: the selected masks; ``mask_pixels`` the pixels of their union.
        prediction: the union of the selected masks as COCO RLE (None when empty).
        artifacts: the request's directory relative to the run directory, if one was written.
        time_s: wall-clock seconds of the request.
        extra: JSON-safe details (mask scores, usage breakdown, phrases tried).
    """

    id: str
    image_path: str
    query: str
    status: str
    masks: int = 0
    mask_pixels: int = 0
    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    time_s: float = 0.0
    failure: str | None = None
    infra_error: bool = False
    prediction: dict[str, Any] | None = None
    artifacts: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RequestResult:
        """Read a stored record back, also one stored before batches had their own record
        type (an evaluation sample's record with the masks in ``extra`` and their pixels
        as ``pred_area``), so that those run directories still resume."""
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in doc.items() if k in known}
        if "mask_pixels" not in doc:
            extra = dict(doc.get("extra") or {})
            data["masks"] = int(extra.pop("masks", 0))
            data["mask_pixels"] = int(doc.get("pred_area", 0))
            data["extra"] = extra
        return cls(**data)
