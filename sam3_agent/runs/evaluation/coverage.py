"""How much of a split a run scored (``6/200 (3%)``), out of the :class:`Population` ``eval``
records before ``--limit`` and ``--shard`` (older run directories: the run's plan, or unknown)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeGuard

POPULATION_KEY = "population"
"""The results-store meta key :class:`Population` is recorded under."""

Basis = Literal["split", "plan"]


class Tagged(Protocol):
    @property
    def tags(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Population:
    """How many samples a whole split holds as loaded, overall and per tag."""

    samples: int
    tags: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, samples: Iterable[Tagged]) -> Population:
        items = list(samples)
        tags = Counter(t for s in items for t in s.tags)
        return cls(len(items), dict(sorted(tags.items())))

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "tags": dict(self.tags)}

    @classmethod
    def from_json(cls, doc: Any) -> Population | None:
        """The population ``doc`` holds; None when missing or malformed (total unknown)."""
        if not isinstance(doc, Mapping):
            return None
        samples, tags = doc.get("samples"), doc.get("tags", {})
        if not _count(samples) or not isinstance(tags, Mapping):
            return None
        if not all(isinstance(t, str) and _count(n) for t, n in tags.items()):
            return None
        return cls(samples, dict(tags))

    def count(self, tag: str | None = None) -> int | None:
        """Samples of the split or its ``tag`` subset (None: not counted)."""
        return self.samples if tag is None else self.tags.get(tag)


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class Coverage:
    """``scored`` samples (failed ones too) out of ``total``: the whole split's (``basis``
    ``"split"``), the latest invocation's plan (``"plan"``), or None when unknown."""

    scored: int
    total: int | None
    basis: Basis | None

    @property
    def partial(self) -> bool | None:
        """True: part of the split was scored; False: all of it; None: cannot tell."""
        if self.total is None:
            return None
        if self.scored < self.total:
            return True
        return False if self.basis == "split" else None

    @property
    def text(self) -> str:
        """``6/200 (3%)``; the plan or the unknown total named when that is all there is."""
        if self.total is None:
            return f"{self.scored} scored, total unknown"
        ratio = f"{self.scored}/{self.total} ({_percent(self.scored, self.total)})"
        if self.basis == "plan":
            return f"{ratio} of the run's plan, split size not recorded"
        return ratio

    def to_dict(self) -> dict[str, Any]:
        counts = {"scored": self.scored, "total": self.total, "of": self.basis}
        return {**counts, "partial": self.partial, "text": self.text}

    @classmethod
    def of(
        cls,
        scored: int,
        population: Population | None,
        planned: int | None,
        tag: str | None = None,
    ) -> Coverage:
        """Out of the recorded ``population``, else of the run's ``planned`` samples."""
        if population is not None:
            total = population.count(tag)
            return cls(scored, total, None if total is None else "split")
        if tag is None and planned is not None:
            return cls(scored, planned, "plan")
        return cls(scored, None, None)

    @classmethod
    def combined(cls, parts: Iterable[Coverage]) -> Coverage:
        """Several splits together: known only where every part is."""
        items = list(parts)
        scored = sum(c.scored for c in items)
        totals = [c.total for c in items]
        if not items or any(t is None for t in totals):
            return cls(scored, None, None)
        basis: Basis = "split" if all(c.basis == "split" for c in items) else "plan"
        return cls(scored, sum(t for t in totals if t is not None), basis)


def _percent(part: int, whole: int) -> str:
    """Rounded down while partial, so a run short of its split never reads 100%."""
    if whole == 0:
        return "100%" if part == 0 else "–"
    share = 100 * part / whole
    if part < whole:
        return "<1%" if 0 < share < 1 else f"{math.floor(share)}%"
    return f"{round(share)}%"


def partial_text(runs: Iterable[tuple[str, str, Coverage]]) -> str | None:
    """The report's warning line: each ``(label, split, coverage)`` that scored part of its
    split, then each whose coverage is unknown; or None."""
    partial, unknown = [], []
    for label, split, coverage in runs:
        if coverage.partial:
            partial.append(f"{label} {split} {coverage.text}")
        elif coverage.partial is None:
            unknown.append(f"{label} {split} ({coverage.text})")
    parts = []
    if partial:
        parts.append(
            "compared with published figures of whole splits on part of the split: "
            + "; ".join(partial)
        )
    if unknown:
        parts.append("coverage of the split unknown for " + "; ".join(unknown))
    return "; ".join(parts) or None
