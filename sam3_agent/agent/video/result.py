"""`VideoResult`: what one video session produced, and its JSON form (``result.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent.agent.result import Status, Usage
from sam3_agent.values.tracks import Tracks
from sam3_agent.values.version import __version__


@dataclass
class VideoResult:
    """The outcome of :meth:`sam3_agent.Sam3VideoAgent.run`.

    Attributes:
        status: ``masks`` (at least one track selected), ``no_mask`` or ``failed``.
        tracks: the selected tracks, per-frame masks at the video's resolution (empty unless
            ``masks``), keyed by frame position among :attr:`video`'s ``frames_used``.
        video: where the clip came from, its size and frame rate, the frames used (source
            indices) and, for a damaged file, which frames could not be read.
        rounds, usage, timings, model, failure, phrases_tried, context, prompts: as for
            :class:`~sam3_agent.agent.result.AgentResult`.
    """

    query: str
    status: Status
    tracks: Tracks
    video: dict[str, Any]
    rounds: int
    usage: Usage
    timings: dict[str, float]
    model: str
    failure: str | None = None
    phrases_tried: list[str] = field(default_factory=list)
    output_dir: Path | None = None
    context: dict[str, Any] | None = None
    prompts: dict[str, str] | None = None
    options: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document. ``tracks`` follow the YouTube-VIS layout: per
        object, one COCO RLE per frame used (``null`` where it is absent), aligned with
        ``video.frames_used``."""
        h, w = self.tracks.size
        return {
            "query": self.query,
            "video": {**self.video, "height": h, "width": w},
            "status": self.status,
            "failure": self.failure,
            "tracks": self.tracks.youtube_vis(),
            "rounds": self.rounds,
            "phrases_tried": self.phrases_tried,
            "usage": self.usage.to_dict(),
            "context": self.context,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "model": self.model,
            "prompts": self.prompts,
            "options": self.options,
            "version": __version__,
        }
