"""Run directories merged into *methods*, a row of the paper-style tables each: directories
whose settings differ only in split, shard or preset are one method."""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS
from sam3_agent.runs.evaluation.coverage import POPULATION_KEY, Coverage, Population
from sam3_agent.runs.evaluation.metrics import Breakdown, Summary, breakdown
from sam3_agent.runs.evaluation.results import EvalRecord, SampleResult, VideoSampleResult
from sam3_agent.runs.evaluation.video.metrics import VideoBreakdown, VideoSummary
from sam3_agent.runs.evaluation.video.metrics import breakdown as video_breakdown
from sam3_agent.runs.jobs.records import JobRecord
from sam3_agent.runs.jobs.store import reading
from sam3_agent.values.errors import UserError

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=EvalRecord)

KIND_KEY = "kind"
"""The run setting that names what an evaluation scored; absent: images."""
IMAGE, VIDEO = "image", "video"

MERGED_KEYS = ("split", "shard", "preset")
"""Settings that may differ between run directories merged into one method."""

SPLIT_ORDER = ("val", "test", "testA", "testB", "train")


@dataclass
class MergedRuns(ABC, Generic[R]):
    """Run directories merged into one method. ``populations``: per split, the whole split's
    size as ``eval`` recorded it (None: not); ``planned_by_split``: what they planned, summed."""

    label: str
    config: dict[str, Any]
    run_dirs: list[Path]
    results: list[R]
    planned: int | None
    populations: dict[str, Population | None]
    planned_by_split: dict[str, int | None]

    sample_metric: ClassVar[str]
    """The figure each sample scores, as :meth:`sample_figures` gives it."""

    @property
    def dataset(self) -> str:
        return str(self.config.get("dataset", "?"))

    @abstractmethod
    def scored_splits(self) -> list[str]:
        """The splits scored, in the dataset's order."""

    @abstractmethod
    def metrics_json(self) -> dict[str, Any]:
        """The method's figures as ``metrics.json`` lists them."""

    @abstractmethod
    def sample_figures(self) -> dict[str, tuple[float, bool]]:
        """Per stored sample id: its :attr:`sample_metric` in ``[0, 1]`` and whether it failed."""

    def splits(self) -> list[str]:
        """The splits scored, then the splits recorded with nothing scored yet."""
        scored = self.scored_splits()
        return scored + [s for s in self.populations if s not in scored]

    def coverage(self, split: str, tag: str | None = None) -> Coverage:
        """Samples of ``split`` (its ``tag`` subset) scored, out of the whole split's; every
        stored sample counts (ReVOS's overall leaves out other types, scored all the same)."""
        scored = sum(r.split == split and (tag is None or tag in r.tags) for r in self.results)
        return Coverage.of(
            scored, self.populations.get(split), self.planned_by_split.get(split), tag
        )

    def usage(self) -> dict[str, Any]:
        """What the stored samples cost: counts, rounds, tokens and time."""
        results, n = self.results, len(self.results)
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in results)
        return {
            "samples": n,
            "planned": self.planned,
            "failed": sum(r.failed for r in results),
            "infrastructure_errors": sum(r.infra_error for r in results),
            "mean_rounds": sum(r.rounds for r in results) / n if n else None,
            "prompt_tokens": sum(r.prompt_tokens for r in results),
            "completion_tokens": sum(r.completion_tokens for r in results),
            "tokens_per_sample": tokens / n if n else None,
            "mean_time_s": sum(r.time_s for r in results) / n if n else None,
        }


@dataclass
class Method(MergedRuns[SampleResult]):
    """Image results, with gIoU, cIoU and the rest per split and tag."""

    metrics: Breakdown = field(init=False)
    sample_metric = "IoU"

    def __post_init__(self) -> None:
        self.metrics = breakdown(r.scored() for r in self.results)

    def sample_figures(self) -> dict[str, tuple[float, bool]]:
        return {r.id: (r.iou, r.failed) for r in self.results}

    def scored_splits(self) -> list[str]:
        return ordered_splits(self.metrics.splits)

    def metrics_json(self) -> dict[str, Any]:
        return self.metrics.to_dict()

    def summary(self, split: str, tag: str | None = None) -> Summary | None:
        """The split's figures (``tag`` None) or its ``tag`` subset's."""
        m = self.metrics
        return m.splits.get(split) if tag is None else m.split_tags.get(split, {}).get(tag)

    def overall_coverage(self) -> Coverage:
        """:meth:`coverage` of every split the method holds, together."""
        splits = dict.fromkeys([*self.populations, *self.metrics.splits])
        return Coverage.combined(self.coverage(split) for split in splits)


@dataclass
class VideoMethod(MergedRuns[VideoSampleResult]):
    """Video results, with J, F and J&F per split: overall (as the dataset's official one)
    and per subset tag."""

    metrics: dict[str, VideoBreakdown] = field(init=False)
    sample_metric = "J&F"

    def __post_init__(self) -> None:
        info = VIDEO_DATASETS.get(self.dataset)
        by_split: dict[str, list[VideoSampleResult]] = {}
        for r in self.results:
            by_split.setdefault(r.split, []).append(r)
        self.metrics = {
            split: video_breakdown(
                (r.scored() for r in by_split[split]),
                overall_from=info.overall_from if info is not None else None,
            )
            for split in ordered_splits(by_split, info.splits if info is not None else ())
        }

    def scored_splits(self) -> list[str]:
        return list(self.metrics)

    def sample_figures(self) -> dict[str, tuple[float, bool]]:
        return {r.id: (r.scored().score.jf, r.failed) for r in self.results}

    def metrics_json(self) -> dict[str, Any]:
        return {s: b.to_dict() for s, b in self.metrics.items()}

    def summary(self, split: str, tag: str | None = None) -> VideoSummary | None:
        """The split's overall figures (``tag`` None) or its ``tag`` subset's."""
        scored = self.metrics.get(split)
        if scored is None:
            return None
        return scored.overall if tag is None else scored.tags.get(tag)

    def usage(self) -> dict[str, Any]:
        n = len(self.results)
        frames = sum(r.frames_scored for r in self.results) / n if n else None
        return {**super().usage(), "frames_scored_per_sample": frames}


def ordered_splits(splits: Collection[str], order: Sequence[str] = SPLIT_ORDER) -> list[str]:
    """``splits`` in ``order``, then the others sorted."""
    known = [s for s in order if s in splits]
    return known + sorted(set(splits) - set(known))


def method_label(config: dict[str, Any]) -> str:
    if config.get("mode") == "sam3-only":
        return f"SAM 3 only ({config.get('sam3')})"
    if config.get(KIND_KEY) == VIDEO:
        return f"{config.get('model')} + SAM 3 video agent"
    # The tool-set ablation's two rows (absent: the paper's tools, as before the setting).
    agent = config.get("agent")
    extended = isinstance(agent, dict) and agent.get("tool_set") == "extended"
    return f"{config.get('model')} + SAM 3 agent" + (" (extended tools)" if extended else "")


def runs_kind(run_dirs: Sequence[Path]) -> str:
    """``image`` or ``video``: the one kind of every directory in ``run_dirs``."""
    if not run_dirs:
        raise UserError("give at least one run directory")
    kinds = set()
    for run_dir in run_dirs:
        with reading(run_dir, JobRecord.from_json) as store:  # its settings only
            kinds.add(str((store.config() or {}).get(KIND_KEY, IMAGE)))
    if len(kinds) > 1:
        raise UserError(
            "these run directories hold image and video evaluations: report them separately"
        )
    return kinds.pop()


def load_methods(run_dirs: Sequence[Path], kind: str) -> list[Any]:
    """Run directories of one ``kind`` as :class:`Method` or :class:`VideoMethod` values,
    merging those whose settings differ only in :data:`MERGED_KEYS` (a sample id stored twice
    is counted once: the first directory given wins)."""
    record, method = (VideoSampleResult, VideoMethod) if kind == VIDEO else (SampleResult, Method)
    groups: dict[str, dict[str, Any]] = {}
    for run_dir in run_dirs:
        with reading(run_dir, record.from_json) as store:
            config = store.config() or {}
            results = store.results()
            planned = store.planned()
            population = Population.from_json(store.meta(POPULATION_KEY))
        key_config = {k: v for k, v in config.items() if k not in MERGED_KEYS}
        group = groups.setdefault(
            json.dumps(key_config, sort_keys=True),
            {"config": key_config, "dirs": [], "results": {}, "splits": {}},
        )
        group["dirs"].append(run_dir)
        group["splits"].setdefault(str(config.get("split", "?")), []).append((planned, population))
        for r in results:
            if r.id in group["results"]:
                logger.warning(
                    "sample %s is stored in several run directories; kept the first", r.id
                )
                continue
            group["results"][r.id] = r
    methods = []
    labels: dict[str, int] = {}
    for group in groups.values():
        # Rows of one table need distinct labels; other datasets' tables may reuse them.
        label = method_label(group["config"])
        key = f"{group['config'].get('dataset')}\0{label}"
        labels[key] = labels.get(key, 0) + 1
        if labels[key] > 1:
            label = f"{label} [{labels[key]}]"
        splits = group["splits"].items()
        planned_by_split = {split: _total(p for p, _ in dirs) for split, dirs in splits}
        methods.append(
            method(
                label=label,
                config=group["config"],
                run_dirs=group["dirs"],
                results=sorted(group["results"].values(), key=lambda r: r.id),
                planned=_total(planned_by_split.values()),
                populations={split: _one_population(split, dirs) for split, dirs in splits},
                planned_by_split=planned_by_split,
            )
        )
    return methods


def _total(planned: Iterable[int | None]) -> int | None:
    counts = list(planned)
    return None if None in counts else sum(c for c in counts if c is not None)


def _one_population(
    split: str, dirs: Sequence[tuple[int | None, Population | None]]
) -> Population | None:
    """The split's size as its run directories (shards) recorded it: None when none did or
    they disagree (two copies of the dataset?)."""
    known: list[Population] = []
    for _, p in dirs:
        if p is not None and p not in known:
            known.append(p)
    if len(known) > 1:
        logger.warning(
            "the run directories of split %s recorded different split sizes (%s); "
            "its coverage is reported as unknown",
            split,
            ", ".join(sorted({str(p.samples) for p in known})),
        )
        return None
    return known[0] if known else None
