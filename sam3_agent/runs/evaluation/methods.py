"""Run directories merged into *methods*: one row of the paper-style tables each.

Run directories whose settings differ only in split or shard are merged into one method:
shards of one split, or the val and test runs of one model. Different models or modes
become different methods. :func:`merge_runs` does the merging for records of any kind (the
video report merges its runs the same way); :func:`load_methods` builds image methods.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from sam3_agent.runs.evaluation.coverage import POPULATION_KEY, Coverage, Population
from sam3_agent.runs.evaluation.metrics import Breakdown, breakdown
from sam3_agent.runs.evaluation.results import SampleResult
from sam3_agent.runs.jobs.base import R
from sam3_agent.runs.jobs.records import JobRecord
from sam3_agent.runs.jobs.store import Decode, reading
from sam3_agent.values.errors import UserError

logger = logging.getLogger(__name__)

KIND_KEY = "kind"
"""The run setting that names what an evaluation scored; absent: images."""
IMAGE, VIDEO = "image", "video"

MERGED_KEYS = ("split", "shard", "preset")
"""Settings that may differ between run directories merged into one method (the val and
test presets of one model are one row)."""


@dataclass
class MergedRuns(Generic[R]):
    """Run directories merged into one method (see :func:`merge_runs`): what an image
    :class:`Method` and a video method share."""

    label: str
    config: dict[str, Any]
    run_dirs: list[Path]
    results: list[R]
    planned: int | None
    populations: dict[str, Population | None]
    """Per split: the whole split's size as ``eval`` recorded it (None: not recorded)."""
    planned_by_split: dict[str, int | None]
    """Per split: what the latest invocations of its run directories planned, summed."""

    @property
    def dataset(self) -> str:
        return str(self.config.get("dataset", "?"))

    def describe(self, **figures: Any) -> dict[str, Any]:
        """The method's entry in a report's ``metrics.json``: its label, settings and run
        directories, then ``figures``."""
        return {
            "label": self.label,
            "config": self.config,
            "run_dirs": [str(d) for d in self.run_dirs],
            **figures,
        }


M = TypeVar("M", bound=MergedRuns[Any])


@dataclass
class Method(MergedRuns[SampleResult]):
    """The merged image results of run directories that share their settings but
    split/shard."""

    metrics: Breakdown = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = breakdown(r.scored() for r in self.results)

    def coverage(self, split: str, tag: str | None = None) -> Coverage:
        """Samples of ``split`` (its ``tag`` subset) scored, out of the whole split's; out
        of the run's plan where the split's size was not recorded (tags: unknown then)."""
        summary = (
            self.metrics.splits.get(split)
            if tag is None
            else self.metrics.split_tags.get(split, {}).get(tag)
        )
        scored = summary.count if summary is not None else 0
        return Coverage.of(
            scored, self.populations.get(split), self.planned_by_split.get(split), tag
        )

    def overall_coverage(self) -> Coverage:
        """:meth:`coverage` of every split the method holds, together."""
        splits = dict.fromkeys([*self.populations, *self.metrics.splits])
        return Coverage.combined(self.coverage(split) for split in splits)

    def usage(self) -> dict[str, Any]:
        return usage_of(self.results, self.planned)


def usage_of(results: Sequence[JobRecord], planned: int | None) -> dict[str, Any]:
    """What a method's stored samples cost, of any kind: counts, rounds, tokens and time."""
    n = len(results)
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in results)
    return {
        "samples": n,
        "planned": planned,
        "failed": sum(r.failed for r in results),
        "infrastructure_errors": sum(r.infra_error for r in results),
        "mean_rounds": sum(r.rounds for r in results) / n if n else None,
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "completion_tokens": sum(r.completion_tokens for r in results),
        "tokens_per_sample": tokens / n if n else None,
        "mean_time_s": sum(r.time_s for r in results) / n if n else None,
    }


def method_label(config: dict[str, Any]) -> str:
    if config.get("mode") == "sam3-only":
        return f"SAM 3 only ({config.get('sam3')})"
    if config.get(KIND_KEY) == VIDEO:
        return f"{config.get('model')} + SAM 3 video agent"
    return f"{config.get('model')} + SAM 3 agent"


def run_kind(run_dir: Path) -> str:
    """``image`` or ``video``; run directories made before videos were evaluated are image
    runs."""
    with reading(run_dir, JobRecord.from_json) as store:  # its settings only: nothing decoded
        return str((store.config() or {}).get(KIND_KEY, IMAGE))


def runs_kind(run_dirs: Sequence[Path]) -> str:
    """The one kind (:func:`run_kind`) of every directory in ``run_dirs``."""
    if not run_dirs:
        raise UserError("give at least one run directory")
    kinds = {run_kind(d) for d in run_dirs}
    if len(kinds) > 1:
        raise UserError(
            "these run directories hold image and video evaluations: report them separately"
        )
    return kinds.pop()


def load_methods(run_dirs: Sequence[Path]) -> list[Method]:
    """:func:`merge_runs` for image run directories."""
    return merge_runs(run_dirs, SampleResult.from_json, IMAGE, Method)


def merge_runs(run_dirs: Sequence[Path], decode: Decode[R], kind: str, method: type[M]) -> list[M]:
    """Read run directories of one ``kind`` and merge those whose settings differ only in
    :data:`MERGED_KEYS` into ``method``s. A sample id stored in two merged directories is
    counted once (the first directory given wins) and a warning is logged."""
    if not run_dirs:
        raise UserError("give at least one run directory")
    groups: dict[str, dict[str, Any]] = {}
    for run_dir in run_dirs:
        found = run_kind(run_dir)
        if found != kind:
            raise UserError(f"{run_dir} holds an evaluation of {found}s, not of {kind}s")
        with reading(run_dir, decode) as store:
            config = store.config() or {}
            results = store.results()
            planned = store.planned()
            population = Population.from_json(store.meta(POPULATION_KEY))
        key_config = {k: v for k, v in config.items() if k not in MERGED_KEYS}
        key = json.dumps(key_config, sort_keys=True)
        group = groups.setdefault(
            key,
            {
                "config": key_config,
                "dirs": [],
                "results": {},
                "planned": 0,
                "splits": {},
            },
        )
        group["dirs"].append(run_dir)
        group["planned"] = _add(group["planned"], planned)
        group["splits"].setdefault(str(config.get("split", "?")), []).append(
            (run_dir, planned, population)
        )
        for r in results:
            if r.id in group["results"]:
                logger.warning(
                    "sample %s is stored in several run directories; kept the first", r.id
                )
                continue
            group["results"][r.id] = r
    methods: list[M] = []
    labels: dict[str, int] = {}
    for group in groups.values():
        # Rows of one table need distinct labels; other datasets' tables may reuse them.
        label = method_label(group["config"])
        key = f"{group['config'].get('dataset')}\0{label}"
        labels[key] = labels.get(key, 0) + 1
        if labels[key] > 1:
            label = f"{label} [{labels[key]}]"
        methods.append(
            method(
                label=label,
                config=group["config"],
                run_dirs=group["dirs"],
                results=sorted(group["results"].values(), key=lambda r: r.id),
                planned=group["planned"],
                populations={
                    split: _one_population(split, dirs) for split, dirs in group["splits"].items()
                },
                planned_by_split={
                    split: _sum_planned(p for _, p, _ in dirs)
                    for split, dirs in group["splits"].items()
                },
            )
        )
    return methods


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _sum_planned(planned: Iterable[int | None]) -> int | None:
    total: int | None = 0
    for p in planned:
        total = _add(total, p)
    return total


def _one_population(
    split: str, dirs: Sequence[tuple[Path, int | None, Population | None]]
) -> Population | None:
    """The split's size as its run directories (shards) recorded it: None when none did,
    or when they disagree (two copies of the dataset?): a report then says it is unknown."""
    known: list[Population] = []
    for _, _, p in dirs:
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
