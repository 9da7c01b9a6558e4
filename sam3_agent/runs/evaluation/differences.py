"""Per-sample differences between methods on the same dataset: which samples moved, and by
how much."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sam3_agent.runs.evaluation.methods import MergedRuns

EPSILON = 1e-3
"""A change of the figure up to this (on the ``[0, 1]`` scale) is no difference."""
SHOWN = 20
"""Differences listed per pair of methods; the rest are counted."""


@dataclass(frozen=True)
class SampleDifference:
    """One sample's figure in the baseline and in the other method, in ``[0, 1]``."""

    id: str
    baseline: float
    other: float
    baseline_failed: bool
    other_failed: bool

    @property
    def delta(self) -> float:
        """The other method's figure minus the baseline's."""
        return self.other - self.baseline

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "baseline": round(self.baseline, 4),
            "other": round(self.other, 4),
            "delta": round(self.delta, 4),
            "baseline_failed": self.baseline_failed,
            "other_failed": self.other_failed,
        }


@dataclass(frozen=True)
class Differences:
    """Where ``other`` differs from ``baseline`` (method labels), largest change first;
    ``compared``: samples both stored; ``unmatched``: samples only one stored."""

    baseline: str
    other: str
    dataset: str
    metric: str
    compared: int
    unmatched: int
    samples: Sequence[SampleDifference]

    @property
    def shown(self) -> Sequence[SampleDifference]:
        return self.samples[:SHOWN]

    @property
    def more(self) -> int:
        """Differences beyond the :data:`SHOWN` listed."""
        return max(0, len(self.samples) - SHOWN)

    @property
    def title(self) -> str:
        return f"{self.other} against {self.baseline}"

    def headline(self) -> str:
        """``3 of 40 samples differ in IoU (by more than 0.001, or in failing)``."""
        unmatched = f"; {self.unmatched} stored by one run only" if self.unmatched else ""
        return (
            f"{len(self.samples)} of {self.compared} samples differ in {self.metric} (by more "
            f"than {EPSILON:g}, or in failing){unmatched}"
        )

    def to_dict(self) -> dict[str, Any]:
        """As ``metrics.json`` lists it: the :data:`SHOWN` largest, and how many more."""
        return {
            "baseline": self.baseline,
            "method": self.other,
            "dataset": self.dataset,
            "metric": self.metric,
            "epsilon": EPSILON,
            "compared": self.compared,
            "unmatched": self.unmatched,
            "differing": len(self.samples),
            "samples": [s.to_dict() for s in self.shown],
            "more": self.more,
        }


def compare_samples(baseline: MergedRuns[Any], other: MergedRuns[Any]) -> Differences:
    """Where ``other``'s samples differ from the same samples of ``baseline``."""
    before, after = baseline.sample_figures(), other.sample_figures()
    samples = []
    for sample_id in sorted(before.keys() & after.keys()):
        (b, b_failed), (a, a_failed) = before[sample_id], after[sample_id]
        if abs(a - b) > EPSILON or a_failed != b_failed:
            samples.append(SampleDifference(sample_id, b, a, b_failed, a_failed))
    samples.sort(key=lambda s: -abs(s.delta))  # stable: ids in order within one size
    return Differences(
        baseline=baseline.label,
        other=other.label,
        dataset=baseline.dataset,
        metric=baseline.sample_metric,
        compared=len(before.keys() & after.keys()),
        unmatched=len(before.keys() ^ after.keys()),
        samples=samples,
    )


def sample_differences(methods: Sequence[MergedRuns[Any]]) -> list[Differences]:
    """Per dataset, each later method against the first (the baseline)."""
    first: dict[str, MergedRuns[Any]] = {}
    found = []
    for m in methods:
        if m.dataset in first:
            found.append(compare_samples(first[m.dataset], m))
        else:
            first[m.dataset] = m
    return found
