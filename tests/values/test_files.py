from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.agent import rundir
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.agent.trace import Trace
from sam3_agent.values.detections import Detections
from sam3_agent.values.files import atomic_output, atomic_write_json, json_text, safe_name, utf8
from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool


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


def test_atomic_output_renames_a_finished_file_and_removes_a_failed_one(tmp_path: Path) -> None:
    """For writers that open a file by name (a video encoder): the file appears complete,
    with a new file's mode, or not at all."""
    path = tmp_path / "video.mp4"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(path, suffix=".mp4") as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".mp4"
        tmp.write_bytes(b"half")
        raise RuntimeError("the encoder failed")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["video.mp4"]
    with atomic_output(path, suffix=".mp4") as tmp:
        tmp.write_bytes(b"new")
    assert path.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["video.mp4"]
    fresh = tmp_path / "fresh.bin"
    fresh.write_bytes(b"")
    assert path.stat().st_mode & 0o777 == fresh.stat().st_mode & 0o777


def test_disabled_trace_writes_nothing(tmp_path: Path) -> None:
    trace = Trace(None)
    trace.record({"a": 1})
    assert trace.save_text("x.txt", "hello") == "x.txt"
    assert list(tmp_path.iterdir()) == []


def test_json_text_writes_lone_surrogates_as_escapes(tmp_path: Path) -> None:
    document = {"reply": "dog \ud83d", "ok": "chat \u00e9 \U0001f600"}
    atomic_write_json(tmp_path / "r.json", document)
    raw = (tmp_path / "r.json").read_bytes()
    assert json.loads(raw.decode("utf-8")) == document
    assert "chat \u00e9 \U0001f600" in raw.decode("utf-8")  # readable, not escaped


def test_json_text_survives_documents_the_encoder_refuses() -> None:
    deep: object = []
    for _ in range(5000):
        deep = [deep]
    text = json_text({"a": deep, "n": 10**5000})
    assert "nested too deeply" in text and "integer of about 5000 digits" in text


@given(st.text(st.one_of(st.characters(), st.characters(categories=["Cs"]))))
def test_every_string_can_be_written(text: str) -> None:
    json.loads(json_text({"t": text}).encode("utf-8"))
    assert isinstance(safe_name(text), str)
    utf8(text).decode("utf-8")  # raises if the bytes are not UTF-8


def test_trace_accepts_any_text(tmp_path: Path) -> None:
    trace = Trace(tmp_path)
    trace.record({"reply": "\udcff"})
    ref = trace.save_text("q \ud800.txt", "query \ud800")
    assert json.loads((tmp_path / "trace.jsonl").read_text("utf-8")) == {"reply": "\udcff"}
    assert (tmp_path / ref).read_bytes().decode("utf-8") == "query \\ud800"


def test_one_trace_record_is_one_line_for_any_line_splitter(tmp_path: Path) -> None:
    trace = Trace(tmp_path)
    trace.record({"reply": "a\x85b\u2028c\u2029d\x0be"})
    lines = (tmp_path / "trace.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["reply"] == "a\x85b\u2028c\u2029d\x0be"


def test_every_name_the_run_directory_declares_is_an_entry() -> None:
    """The writers name their files by :mod:`rundir`'s constants; each one is an entry that
    ``--overwrite`` may remove, and the entries are nothing else."""
    names = {
        value for key, value in vars(rundir).items() if key.isupper() and isinstance(value, str)
    }
    assert {rundir.OVERLAY_VIDEO, rundir.CONTACT_SHEET} <= names
    assert names == rundir.ENTRIES
    assert set(rundir.MARKERS) <= rundir.ENTRIES


def test_the_run_directory_names_every_file_a_run_writes(tmp_path: Path) -> None:
    """Whatever a resumable run with exports leaves at the top of its directory is named
    in :data:`rundir.ENTRIES` (the CLI's --overwrite removes exactly those)."""
    h, w = 48, 64
    masks = np.zeros((1, h, w), dtype=bool)
    masks[0, 8:24, 8:24] = True
    found = Detections(masks, np.array([[8.0, 8.0, 24.0, 24.0]]), np.array([0.9]))
    chat = ScriptedChatModel(
        replies=[
            tool("segment_phrase", text_prompt="cat"),
            tool("select_masks_and_return", final_answer_masks=[1]),
        ]
    )
    image = np.full((h, w, 3), 127, dtype=np.uint8)
    agent = Sam3Agent(FakeSegmenter({"cat": found}), chat)
    result = agent.run(image, "a cat", output_dir=tmp_path, exports=("png", "polygons"))
    written = {p.name for p in tmp_path.iterdir()}
    assert written <= rundir.ENTRIES
    assert {rundir.RESULT, rundir.OVERLAY, rundir.MASKS_DIR, rundir.TRACE} <= written
    document = json.loads((tmp_path / rundir.RESULT).read_text())
    assert document == rundir.result_document(result, ("png", "polygons"))
    assert document["mask_files"] == ["masks/01.png"] and document["masks"][0]["polygons"]
