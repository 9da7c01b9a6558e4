from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.outputs import Trace, atomic_write_json, safe_name


@given(st.text(max_size=300))
def test_safe_name_never_escapes(text: str) -> None:
    name = safe_name(text)
    assert "/" not in name and "\\" not in name and ".." not in name
    assert 0 < len(name) <= 64
    assert name not in (".", "..")


@pytest.mark.parametrize(("a", "b"), [("a/b", "a b"), ("x?", "x*"), ("", "_")])
def test_distinct_texts_get_distinct_names(a: str, b: str) -> None:
    assert safe_name(a) != safe_name(b)


def test_plain_names_are_kept() -> None:
    assert safe_name("cat_01.jpg") == "cat_01.jpg"


def test_atomic_write_leaves_no_temp_file(tmp_path: Path) -> None:
    atomic_write_json(tmp_path / "sub" / "r.json", {"a": 1})
    assert json.loads((tmp_path / "sub" / "r.json").read_text()) == {"a": 1}
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["r.json"]


def test_disabled_trace_writes_nothing(tmp_path: Path) -> None:
    trace = Trace(None)
    trace.record({"a": 1})
    assert trace.save_text("x.txt", "hello") == "x.txt"
    assert list(tmp_path.iterdir()) == []
