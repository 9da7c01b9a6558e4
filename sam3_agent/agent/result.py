"""`AgentResult` and `VideoResult`: what one session produced, and its JSON form
(``result.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sam3_agent.values.detections import Detections
from sam3_agent.values.messages import TokenUsage
from sam3_agent.values.tracks import Tracks
from sam3_agent.values.version import __version__

ESTIMATE_PARTS = ("main", "checks", "digests")

Status = Literal["masks", "no_mask", "failed"]


@dataclass
class Usage:
    """Tokens and calls of one session, per part."""

    main: TokenUsage = field(default_factory=TokenUsage)
    checks: TokenUsage = field(default_factory=TokenUsage)
    digests: TokenUsage = field(default_factory=TokenUsage)
    cached_calls: int = 0
    estimated: dict[str, dict[str, int]] = field(
        default_factory=lambda: {part: {"text": 0, "image": 0} for part in ESTIMATE_PARTS}
    )
    estimate_source: str = "estimate"

    @property
    def total(self) -> TokenUsage:
        return self.main + self.checks + self.digests

    def add_estimate(self, part: str, text: int, image: int) -> None:
        self.estimated[part]["text"] += text
        self.estimated[part]["image"] += image

    def to_dict(self) -> dict[str, Any]:
        return {
            "main": self.main.to_dict(),
            "checks": self.checks.to_dict(),
            "digests": self.digests.to_dict(),
            "total": self.total.to_dict(),
            "cached_calls": self.cached_calls,
            "estimated_prompt_tokens": {
                "source": self.estimate_source,
                **{
                    part: {**v, "total": v["text"] + v["image"]}
                    for part, v in self.estimated.items()
                },
            },
        }


@dataclass
class SessionResult:
    """What every session's result holds, image or video; ``timings`` in seconds per phase."""

    query: str
    status: Status
    rounds: int
    usage: Usage
    timings: dict[str, float]
    model: str
    failure: str | None = None
    phrases_tried: list[str] = field(default_factory=list)
    output_dir: Path | None = None
    context: dict[str, Any] | None = None
    prompts: dict[str, str] | None = None
    downloaded: dict[str, Any] | None = None
    """Set when the input was fetched from a URL: its ``path`` (the URL), ``url``, ``sha256``."""

    def _document(
        self, source: tuple[str, dict[str, Any]], answer: tuple[str, Any], **extra: Any
    ) -> dict[str, Any]:
        """``result.json``: the ``source`` and ``answer`` entries are the medium's."""
        return {
            "query": self.query,
            source[0]: {**source[1], **(self.downloaded or {})},
            "status": self.status,
            "failure": self.failure,
            answer[0]: answer[1],
            "rounds": self.rounds,
            "phrases_tried": self.phrases_tried,
            "usage": self.usage.to_dict(),
            "context": self.context,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "model": self.model,
            "prompts": self.prompts,
            **extra,
            "version": __version__,
        }


@dataclass(kw_only=True)
class AgentResult(SessionResult):
    """The outcome of :meth:`sam3_agent.Sam3Agent.run`: the final masks at full resolution."""

    detections: Detections
    image_size: tuple[int, int]
    image_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document; masks as COCO RLE, boxes XYXY in pixels."""
        h, w = self.image_size
        masks = [
            {"rle": rle, "box_xyxy": [round(float(v), 2) for v in box], "score": round(score, 4)}
            for rle, (_, box, score) in zip(
                self.detections.to_coco_rle(), self.detections, strict=True
            )
        ]
        image = {"path": self.image_path, "height": h, "width": w}
        return self._document(("image", image), ("masks", masks))


@dataclass(kw_only=True)
class VideoResult(SessionResult):
    """The outcome of :meth:`sam3_agent.Sam3VideoAgent.run`: ``tracks`` keyed by position
    among ``video``'s ``frames_used``."""

    tracks: Tracks
    video: dict[str, Any]
    options: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document; ``tracks`` in the YouTube-VIS layout."""
        h, w = self.tracks.size
        video = {**self.video, "height": h, "width": w}
        tracks = self.tracks.youtube_vis()
        return self._document(("video", video), ("tracks", tracks), options=self.options)
