"""`VideoResult`: what one video session produced, and its JSON form (``result.json``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sam3_agent.agent.result import SessionResult
from sam3_agent.values.tracks import Tracks


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
