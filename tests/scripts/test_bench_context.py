"""scripts/bench/context.py: its simulated model acts on the context, and the table separates
the ceiling (keep-all, unbounded) from the floor (pinned only)."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return importlib.import_module("scripts.bench.context")


def test_a_session_that_loses_nothing_ends_with_the_right_masks(bench: ModuleType) -> None:
    world = bench.make_world(0)
    outcome = bench.run_session(world, "keep-all", bench.UNBOUNDED)
    assert outcome.correct and not outcome.failed
    assert all(outcome.facts[k] > 0 for k in bench.KINDS)  # every kind of fact is planted
    assert outcome.found == outcome.facts


def test_each_kind_of_fact_decides_the_answer(bench: ModuleType) -> None:
    """Without any one of the facts it needs, the simulated model answers wrong."""
    world = bench.make_world(0)
    answer = world.answer()
    assert answer
    targets = {i for i, t in enumerate(world.things) if t.kind == world.target}
    # The note rules out a colour, the constraint a side, the verdict a decoy the best
    # phrase also found: each leaves a wrong mask in when it is missing.
    assert any(world.things[i].colour != world.colour for i in targets - answer)
    assert any(not world.things[i].left for i in targets - answer)
    assert any(i not in targets for i in world.finds[world.best])
    assert world.best != world.candidates[0]  # without the counts the first guess is wrong


def test_the_floor_loses_what_the_ceiling_keeps(bench: ModuleType) -> None:
    world = bench.make_world(0)
    floor = bench.run_session(world, bench.PINNED_ONLY, 4096)
    assert not floor.correct
    assert sum(floor.found.values()) < sum(floor.facts.values())


def test_the_table_separates_ceiling_and_floor(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = bench.main(["--sessions", "2", "--budgets", "4096", "--policies", "sam3"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("| policy") and "tokens/session" in lines[1]
    assert "verdict" in lines[1] and "note" in lines[1]
    assert lines[3].startswith("| keep-all") and lines[4].startswith("| pinned-only")
    assert lines[5].startswith("| sam3")
    ceiling, floor = rows[0], rows[1]
    assert ceiling.accuracy - floor.accuracy >= 0.3
    assert ceiling.recall() - floor.recall() >= 0.3
    assert lines[-1].startswith("ceiling - floor: accuracy")
