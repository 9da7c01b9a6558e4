"""scripts/bench/context.py: its simulated model acts on the context, and the table prints."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return importlib.import_module("scripts.bench.context")


def test_a_session_without_eviction_ends_with_the_right_masks(bench: ModuleType) -> None:
    world = bench.make_world(0)
    outcome = bench.run_session(world, "keep-all", 200_000)
    assert outcome.correct and outcome.facts > 0 and outcome.found == outcome.facts


def test_the_policy_changes_the_outcome(bench: ModuleType) -> None:
    world = bench.make_world(0)
    keep_all = bench.run_session(world, "keep-all", 4096)
    fifo = bench.run_session(world, "fifo", 4096)
    assert not keep_all.correct and keep_all.failed  # the history outgrew 4k tokens
    assert fifo.found < fifo.facts  # fifo lost key facts on the way


def test_the_table_prints(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["context", "--sessions", "1", "--budgets", "4096", "--policies", "sam3"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", argv)
        bench.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("| policy") and "tokens/session" in lines[1]
    assert lines[3].startswith("| sam3")
