"""Which video samples an evaluation takes, as the ``eval`` flags say (the video counterpart
of :class:`~sam3_agent.runs.evaluation.run.EvalSet`).

A :class:`VideoEvalSet` is checked when it is made: an unknown dataset or split, a bad
shard, or a split whose ground truth is not public (scored only by an official server) is a
one-line :class:`~sam3_agent.values.errors.UserError` before anything is read or loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sam3_agent.runs.evaluation.catalog import video_split
from sam3_agent.runs.evaluation.coverage import Population
from sam3_agent.runs.evaluation.methods import KIND_KEY, VIDEO
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from sam3_agent.runs.evaluation.video.datasets import VideoSample


@dataclass(frozen=True)
class VideoEvalSet:
    """Which video samples to evaluate.

    Attributes:
        dataset: one of :data:`~sam3_agent.runs.evaluation.catalog.VIDEO_DATASETS`.
        root: the dataset directory.
        split: the split (None: the dataset's default, its first listed split).
        limit: only the first ``limit`` samples, in dataset order.
        shard: ``(i, n)``: shard ``i`` (0-based) of ``n``, split by video (every expression
            of a video in one shard).
        preset: the preset these settings came from, recorded with the run.

    Raises:
        UserError: unknown dataset or split, a split without public ground truth (the
            message says where it is scored), or a bad shard.
    """

    dataset: str
    root: Path
    split: str | None = None
    limit: int | None = None
    shard: tuple[int, int] = (0, 1)
    preset: str | None = None

    def __post_init__(self) -> None:
        info, split = video_split(self.dataset, self.split)
        no_ground_truth = info.no_public_ground_truth.get(split)
        if no_ground_truth is not None:
            scorable = [s for s in info.splits if s not in info.no_public_ground_truth]
            raise UserError(
                f"cannot score {info.title} {split} here: {no_ground_truth} "
                f"(`split={' or '.join(scorable)}` can be)"
            )
        index, count = self.shard
        if count < 1 or not 0 <= index < count:
            raise UserError(f"`shard` i/n needs 0 <= i < n, got {index}/{count}")
        if self.limit is not None and self.limit < 1:
            raise UserError(f"`limit` must be >= 1, got {self.limit}")
        object.__setattr__(self, "split", split)

    @property
    def split_name(self) -> str:
        """The split evaluated (the default one when none was named)."""
        return str(self.split)

    def load(self) -> VideoSelection:
        """The samples, limited and sharded, and the size of the split they come from.

        Raises:
            DatasetError: missing, unreadable or inconsistent files.
        """
        from sam3_agent.runs.evaluation.runner import select_shard
        from sam3_agent.runs.evaluation.video.datasets import load_video_samples

        whole = load_video_samples(self.dataset, self.root, self.split_name)
        samples = whole if self.limit is None else whole[: self.limit]
        index, count = self.shard
        return VideoSelection(select_shard(samples, index, count), Population.of(whole))

    def identity(self, mode: str) -> dict[str, Any]:
        """What of this selection (and the mode) a run directory is made with."""
        index, count = self.shard
        return {
            KIND_KEY: VIDEO,
            "dataset": self.dataset,
            "split": self.split_name,
            "mode": mode,
            "shard": f"{index}/{count}" if count > 1 else None,
            **({"preset": self.preset} if self.preset else {}),
        }


@dataclass(frozen=True)
class VideoSelection:
    """What :meth:`VideoEvalSet.load` found: the ``samples`` to evaluate (after ``--limit``
    and ``--shard``), and the ``population`` of the whole split, recorded with the run so
    that a report can say how much of the split it covers."""

    samples: list[VideoSample]
    population: Population
