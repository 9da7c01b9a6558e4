"""The record of one evaluated video sample, as the run's results store keeps it."""

from __future__ import annotations

from dataclasses import dataclass

from sam3_agent.runs.evaluation.results import EvalRecord
from sam3_agent.runs.evaluation.video.metrics import ScoredVideo, VideoScore


@dataclass(frozen=True, kw_only=True)
class VideoSampleResult(EvalRecord):
    """One finished video sample: a :class:`~sam3_agent.runs.evaluation.results.EvalRecord` and
    its J and F.

    A sample that raised, or whose agent selected no track, is scored as an empty
    prediction on every frame. ``image_path`` is the video's frame folder; ``prediction`` is
    None (the selected tracks are in the sample's ``result.json``, under ``artifacts``).

    Attributes:
        j, f: mean J and mean F over the annotated frames, fractions in ``[0, 1]``.
        frames_used: frames the agent tracked (0 when the video could not be opened).
    """

    j: float
    f: float
    frames_scored: int
    frames_used: int = 0

    def scored(self) -> ScoredVideo:
        """The view :mod:`~sam3_agent.runs.evaluation.video.metrics` works on."""
        score = VideoScore(j=self.j, f=self.f, frames=self.frames_scored)
        return ScoredVideo(self.id, self.tags, score, self.failed, self.failure)
