"""How much of a split a run scored: the text set beside every published comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.runs.evaluation.coverage import Coverage, Population
from sam3_agent.runs.evaluation.samples import Sample


@pytest.mark.parametrize(
    ("scored", "total", "text"),
    [
        (6, 200, "6/200 (3%)"),
        (199, 200, "199/200 (99%)"),
        (1, 779, "1/779 (<1%)"),
        (0, 5, "0/5 (0%)"),
        (200, 200, "200/200 (100%)"),
    ],
)
def test_text_against_the_split(scored: int, total: int, text: str) -> None:
    assert Coverage(scored, total, "split").text == text


@given(st.integers(min_value=1, max_value=10**6), st.data())
def test_a_partial_split_never_reads_complete(total: int, data: Any) -> None:
    scored = data.draw(st.integers(min_value=0, max_value=total - 1))
    coverage = Coverage(scored, total, "split")
    assert coverage.partial is True
    assert "100%" not in coverage.text
    assert coverage.text.startswith(f"{scored}/{total} (")


def test_the_plan_or_nothing_is_named_rather_than_guessed() -> None:
    planned = Coverage(6, 6, "plan")
    assert planned.partial is None  # all of the plan, but the plan may be a --limit
    assert planned.text == "6/6 (100%) of the run's plan, split size not recorded"
    assert Coverage(3, 6, "plan").partial is True
    unknown = Coverage(6, None, None)
    assert unknown.partial is None and unknown.text == "6 scored, total unknown"
    assert Coverage(200, 200, "split").partial is False
    assert Coverage(200, 200, "split").to_dict() == {
        "scored": 200,
        "total": 200,
        "of": "split",
        "partial": False,
        "text": "200/200 (100%)",
    }


def test_combined_is_known_only_where_every_part_is() -> None:
    val, test = Coverage(200, 200, "split"), Coverage(6, 779, "split")
    assert Coverage.combined([val, test]) == Coverage(206, 979, "split")
    assert Coverage.combined([val, Coverage(3, 3, "plan")]) == Coverage(203, 203, "plan")
    assert Coverage.combined([val, Coverage(3, None, None)]) == Coverage(203, None, None)


def test_population_counts_the_split_and_its_tags() -> None:
    samples = [
        Sample(f"val/{i}", Path("x.jpg"), "q", "val", tags=(tag,))
        for i, tag in enumerate(["short", "long", "long"])
    ]
    population = Population.of(samples)
    assert population == Population(3, {"long": 2, "short": 1})
    assert (population.count(), population.count("long"), population.count("other")) == (3, 2, None)
    assert Population.from_json(population.to_json()) == population


@pytest.mark.parametrize(
    "doc",
    [None, 7, "200", {}, {"samples": -1}, {"samples": True}, {"samples": 2.5},
     {"samples": 3, "tags": []}, {"samples": 3, "tags": {"short": "1"}}],
)  # fmt: skip
def test_a_malformed_population_is_unknown(doc: Any) -> None:
    assert Population.from_json(doc) is None
