"""Which samples an evaluation takes: an :class:`EvalSet` of images or a :class:`VideoEvalSet`
of videos, limited, sharded by image (a video's frame folder), with the whole split's size."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS, video_split
from sam3_agent.runs.evaluation.coverage import Population
from sam3_agent.runs.evaluation.datasets import Sample, load_samples
from sam3_agent.runs.evaluation.methods import KIND_KEY, VIDEO
from sam3_agent.runs.evaluation.video.datasets import VideoSample, load_video_samples
from sam3_agent.runs.jobs.base import J, Job
from sam3_agent.values.errors import UserError

S = TypeVar("S", Sample, VideoSample)


@dataclass(frozen=True)
class Loaded(Generic[S]):
    """The ``samples`` to evaluate (limited and sharded) and the whole split's ``population``."""

    samples: list[S]
    population: Population


@dataclass(frozen=True)
class EvalSet:
    """Image samples (see :func:`load_samples`): ``limit`` keeps the first in dataset order,
    ``shard`` ``(i, n)`` is 0-based."""

    dataset: str
    root: Path
    split: str = "val"
    images: Path | None = None
    all_texts: bool = False
    limit: int | None = None
    shard: tuple[int, int] = (0, 1)
    preset: str | None = None

    def load(self) -> Loaded[Sample]:
        _checked_shard(self.shard)
        if self.dataset in VIDEO_DATASETS:
            raise UserError(f"{self.dataset} is a video dataset: evaluate it with a VideoEvalSet")
        whole = load_samples(
            self.dataset, self.root, self.split, images=self.images, all_texts=self.all_texts
        )
        return _loaded(whole, self.limit, self.shard)

    def identity(self, mode: str) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "split": self.split,
            "mode": mode,
            "all_texts": self.all_texts,
            "shard": _shard_name(self.shard),
            # Only when given: runs made before presets existed keep their identity.
            **({"preset": self.preset} if self.preset else {}),
        }


@dataclass(frozen=True)
class VideoEvalSet:
    """Video samples, as :class:`EvalSet` (sharded by video); ``split`` None: the default,
    named once the set is made."""

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
        _checked_shard(self.shard)
        if self.limit is not None and self.limit < 1:
            raise UserError(f"`limit` must be >= 1, got {self.limit}")
        object.__setattr__(self, "split", split)

    def load(self) -> Loaded[VideoSample]:
        whole = load_video_samples(self.dataset, self.root, self.split)
        return _loaded(whole, self.limit, self.shard)

    def identity(self, mode: str) -> dict[str, Any]:
        return {
            KIND_KEY: VIDEO,
            "dataset": self.dataset,
            "split": self.split,
            "mode": mode,
            "shard": _shard_name(self.shard),
            **({"preset": self.preset} if self.preset else {}),
        }


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n`` (0-based shard index)."""
    try:
        index_text, count_text = text.split("/")
        index, count = int(index_text), int(count_text)
    except ValueError as e:
        raise UserError(f"`shard` must look like i/n (e.g. 0/4), got {text!r}") from e
    if count < 1 or not 0 <= index < count:
        raise UserError(f"`shard` i/n needs 0 <= i < n, got {text!r}")
    return index, count


def _checked_shard(shard: tuple[int, int]) -> None:
    index, count = shard
    if count < 1 or not 0 <= index < count:
        raise UserError(f"`shard` i/n needs 0 <= i < n, got {index}/{count}")


def _shard_name(shard: tuple[int, int]) -> str | None:
    return f"{shard[0]}/{shard[1]}" if shard[1] > 1 else None


def _loaded(whole: list[S], limit: int | None, shard: tuple[int, int]) -> Loaded[S]:
    """The first ``limit`` samples of the split's, sharded, and the whole split's size."""
    samples = whole if limit is None else whole[:limit]
    return Loaded(select_shard(samples, *shard), Population.of(whole))


def shard_of(sample: Job, count: int) -> int:
    """A stable hash of the sample's image file name: an image's queries fall in one shard."""
    digest = hashlib.sha256(sample.image_path.name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def select_shard(samples: Sequence[J], index: int, count: int) -> list[J]:
    if count == 1:
        return list(samples)
    return [s for s in samples if shard_of(s, count) == index]


def eval_set(
    dataset: str, root: Path, split: str, *, images: Path | None = None,
    all_texts: bool = False, limit: int | None = None, shard: tuple[int, int] = (0, 1),
    preset: str | None = None,
) -> EvalSet | VideoEvalSet:  # fmt: skip
    """The :class:`EvalSet` or :class:`VideoEvalSet` of ``dataset``."""
    if dataset in VIDEO_DATASETS:
        return VideoEvalSet(dataset, root, split, limit, shard, preset)
    return EvalSet(dataset, root, split, images, all_texts, limit, shard, preset)
