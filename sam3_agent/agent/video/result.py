"""`VideoResult`: what one video session produced, and its JSON form (``result.json``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sam3_agent.agent.result import SessionResult
from sam3_agent.values.tracks import Tracks


@dataclass(kw_only=True)
class VideoResult(SessionResult):
    """The outcome of :meth:`sam3_agent.Sam3VideoAgent.run`.

    Attributes:
        tracks: the selected tracks, per-frame masks at the video's resolution (empty unless
            ``masks``), keyed by frame position among :attr:`video`'s ``frames_used``.
        video: where the clip came from, its size and frame rate, the frames used (source
            indices) and, for a damaged file, which frames could not be read.
        options: what the model was shown and which frames were tracked.
    """

    tracks: Tracks
    video: dict[str, Any]
    options: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document. ``tracks`` follow the YouTube-VIS layout: per
        object, one COCO RLE per frame used (``null`` where it is absent), aligned with
        ``video.frames_used``."""
        h, w = self.tracks.size
        video = {**self.video, "height": h, "width": w}
        tracks = self.tracks.youtube_vis()
        return self._document(("video", video), ("tracks", tracks), options=self.options)
