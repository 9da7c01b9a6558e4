"""Batch inputs: JSONL, CSV, a folder of images; every problem is one named error."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sam3_agent.runs.batch.requests import (
    MAX_ID_LENGTH,
    BatchRequest,
    default_id,
    load_requests,
)
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import DatasetError, UserError
from tests.support.batch_fixtures import write_images, write_jsonl


def test_jsonl_with_relative_paths_and_default_ids(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path)
    requests = load_requests(path)
    assert len(requests) == 6
    first = requests[0]
    assert first == BatchRequest("one.png:red block", tmp_path / "images" / "one.png", "red block")
    assert first.image_path.is_absolute()
    assert [r.id for r in requests][:2] == ["one.png:red block", "one.png:blue stripe"]


def test_csv_with_ids(tmp_path: Path) -> None:
    (one, two, _) = write_images(tmp_path / "img")
    path = tmp_path / "requests.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "image", "query"])
        writer.writerow(["r1", str(one), "the dog, on the left"])
        writer.writerow(["", "img/two.png", "a cat"])
    requests = load_requests(path)
    assert requests == [
        BatchRequest("r1", one, "the dog, on the left"),
        BatchRequest("two.png:a cat", two, "a cat"),
    ]


def test_line_separators_inside_a_query_are_text(tmp_path: Path) -> None:
    """Only a newline ends a JSONL line, and a quoted CSV field may span lines."""
    write_images(tmp_path / "img")
    query = "the cup\u2028left of\x85the plate"
    jsonl = tmp_path / "r.jsonl"
    row = {"image": "img/one.png", "query": query}
    jsonl.write_text(json.dumps(row, ensure_ascii=False) + "\r\n", encoding="utf-8")
    assert [r.query for r in load_requests(jsonl)] == [query]
    table = tmp_path / "r.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "query"])
        writer.writerow(["img/one.png", "two\nlines"])
        writer.writerow(["img/two.png", query])
        writer.writerow(["img/two.png", ""])
    with pytest.raises(DatasetError, match=r"r\.csv:5: 'query' must be"):
        load_requests(table)
    table.write_text(table.read_text(encoding="utf-8").rsplit("img/two.png,", 1)[0], "utf-8")
    assert [r.query for r in load_requests(table)] == ["two\nlines", query]


def test_folder_with_one_query(tmp_path: Path) -> None:
    write_images(tmp_path / "img")
    (tmp_path / "img" / "notes.txt").write_text("not an image")
    requests = load_requests(tmp_path / "img", query="  the sky ")
    assert [r.id for r in requests] == ["one.png", "three.png", "two.png"]
    assert {r.query for r in requests} == {"the sky"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{"], r"requests.jsonl:1: not a JSON object"),
        (["[1, 2]"], r"requests.jsonl:1: expected a JSON object, got list"),
        (['{"query": "x"}'], r"requests.jsonl:1: 'image' must be a non-empty path"),
        (['{"image": "img/one.png", "query": " "}'], r"requests.jsonl:1: 'query' must be"),
        (['{"image": "img/one.png", "query": "x", "id": true}'], r"'id' must be text or a number"),
        (
            [
                '{"image": "img/one.png", "query": "x", "id": 7}',
                "",
                '{"image": "img/two.png", "query": "y", "id": "7"}',
            ],
            r"the id '7' is used twice",
        ),
        (
            ['{"image": "img/one.png", "query": "x"}', '{"image": "img/one.png", "query": "x"}'],
            r"the id 'one.png:x' is used twice",
        ),
        ([], r"holds no requests"),
    ],
)
def test_bad_jsonl_is_one_named_error(tmp_path: Path, lines: list[str], message: str) -> None:
    write_images(tmp_path / "img")
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=message):
        load_requests(path)


def test_a_missing_image_is_its_requests_concern_not_the_files(tmp_path: Path) -> None:
    """Only the file is checked here: a missing image fails its own request when it runs."""
    write_images(tmp_path / "img")
    path = tmp_path / "requests.jsonl"
    rows = [{"image": "img/one.png", "query": "x"}, {"image": "img/nope.png", "query": "y"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    requests = load_requests(path)
    assert [r.image_path for r in requests] == [tmp_path / "img/one.png", tmp_path / "img/nope.png"]


def test_wrong_kind_of_input_is_a_user_error(tmp_path: Path) -> None:
    write_images(tmp_path / "img")
    jsonl = write_jsonl(tmp_path / "j")
    with pytest.raises(UserError, match="give the query with `query"):
        load_requests(tmp_path / "img")
    with pytest.raises(UserError, match="`query` applies to a folder"):
        load_requests(jsonl, query="x")
    with pytest.raises(UserError, match="does not exist"):
        load_requests(tmp_path / "missing.jsonl")
    (tmp_path / "r.txt").write_text("x")
    with pytest.raises(UserError, match=r"must be a \.jsonl or \.csv"):
        load_requests(tmp_path / "r.txt")
    bad_csv = tmp_path / "r.csv"
    bad_csv.write_text("picture,text\na.png,b\n")
    with pytest.raises(DatasetError, match="must name the columns image and query"):
        load_requests(bad_csv)
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DatasetError, match="cannot read"):
        load_requests(binary)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(queries=st.lists(st.text(min_size=1, max_size=40).filter(str.strip), min_size=1, max_size=6))
def test_any_query_text_round_trips_through_jsonl(tmp_path: Path, queries: list[str]) -> None:
    """Whatever the text (quotes, newlines, non-ASCII), a request keeps it; ids stay unique."""
    write_images(tmp_path / "img")
    rows = [{"image": "img/one.png", "query": q, "id": f"r{i}"} for i, q in enumerate(queries)]
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    requests = load_requests(path)
    assert [r.query for r in requests] == [q.strip() for q in queries]
    assert default_id(Path("a/b.png"), "x") == "b.png:x"


def test_a_long_default_id_is_bounded_and_the_same_on_every_run() -> None:
    """The literal value pins the id across processes and versions: a resume must find it."""
    long_id = default_id(Path("/data/a.png"), "x" * 300)
    assert long_id == "a.png:" + "x" * 181 + "…73c963cae099"
    assert len(long_id) == MAX_ID_LENGTH
    short = "q" * (MAX_ID_LENGTH - len("a.png:"))
    assert default_id(Path("a.png"), short) == f"a.png:{short}"  # ids of old runs unchanged


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    queries=st.lists(
        # Any code point, lone surrogates included (a JSON string may hold one).
        st.text(st.characters(exclude_categories=()), min_size=150, max_size=600).filter(str.strip),
        min_size=1,
        max_size=5,
        unique_by=str.strip,
    )
)
def test_long_queries_without_an_id_get_bounded_unique_stable_ids(
    tmp_path: Path, queries: list[str]
) -> None:
    """A ReasonSeg-style question without an ``id`` never refuses the file."""
    write_images(tmp_path / "img")
    path = tmp_path / "long.jsonl"
    path.write_text(
        "".join(json.dumps({"image": "img/one.png", "query": q}) + "\n" for q in queries)
    )
    requests = load_requests(path)
    ids = [r.id for r in requests]
    assert len(set(ids)) == len(queries)
    assert all(1 <= len(i) <= MAX_ID_LENGTH and i.startswith("one.png:") for i in ids)
    assert ids == [default_id(Path("one.png"), q.strip()) for q in queries]
    assert [r.id for r in load_requests(path)] == ids  # the same on a rerun


def test_video_rows_beside_image_rows_in_jsonl(tmp_path: Path) -> None:
    (one, _, _) = write_images(tmp_path / "img")
    rows = [
        {"image": "img/one.png", "query": "a cat"},
        {"video": "clips/a.mp4", "query": "the dog"},
        {"video": "clips/frames", "query": "the dog", "stride": 2, "max_frames": 10},
        {"video": "clips/a.mp4", "query": "the dog", "start": 1.5, "end": 4, "id": "late"},
        {"video": "clips/frames", "query": "x", "fps": 25, "start": 0, "image": None},
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    requests = load_requests(path)
    clip, frames = tmp_path / "clips" / "a.mp4", tmp_path / "clips" / "frames"
    assert requests == [
        BatchRequest("one.png:a cat", one, "a cat"),
        BatchRequest("a.mp4:the dog", clip, "the dog", FrameSelection()),
        BatchRequest(
            "frames[stride=2,max_frames=10]:the dog",
            frames,
            "the dog",
            FrameSelection(stride=2, max_frames=10),
        ),
        BatchRequest("late", clip, "the dog", FrameSelection(start_s=1.5, end_s=4.0)),
        BatchRequest(
            "frames[start=0,fps=25]:x", frames, "x", FrameSelection(start_s=0.0, fps=25.0)
        ),
    ]
    assert [r.media for r in requests] == ["image", "video", "video", "video", "video"]


def test_video_rows_in_csv_leave_the_image_cell_empty(tmp_path: Path) -> None:
    (one, _, _) = write_images(tmp_path / "img")
    path = tmp_path / "requests.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "video", "query", "stride", "end"])
        writer.writerow(["img/one.png", "", "a cat", "", ""])
        writer.writerow(["", "a.mp4", "the dog", "3", "2.5"])
    assert load_requests(path) == [
        BatchRequest("one.png:a cat", one, "a cat"),
        BatchRequest(
            "a.mp4[stride=3,end=2.5]:the dog",
            tmp_path / "a.mp4",
            "the dog",
            FrameSelection(stride=3, end_s=2.5),
        ),
    ]
    videos_only = tmp_path / "videos.csv"
    videos_only.write_text("video,query\na.mp4,the dog\n")
    assert [r.media for r in load_requests(videos_only)] == ["video"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"image": "a.png", "video": "a.mp4", "query": "x"}, r":1: name an 'image' or a 'video'"),
        ({"video": " ", "query": "x"}, r":1: 'video' must be a non-empty path"),
        ({"video": 3, "query": "x"}, r"'video' must be a non-empty path"),
        ({"image": "a.png", "query": "x", "stride": 2}, r"'stride' applies to a video"),
        ({"video": "a.mp4", "query": "x", "stride": 0}, r"'stride' must be >= 1, got 0"),
        ({"video": "a.mp4", "query": "x", "stride": 1.5}, r"'stride' must be a whole number"),
        ({"video": "a.mp4", "query": "x", "stride": True}, r"'stride' must be a whole number"),
        ({"video": "a.mp4", "query": "x", "max_frames": "ten"}, r"'max_frames' must be a whole"),
        ({"video": "a.mp4", "query": "x", "start": -1}, r"'start' must be >= 0, got -1"),
        ({"video": "a.mp4", "query": "x", "end": "NaN"}, r"'end' must be a number"),
        ({"video": "a.mp4", "query": "x", "fps": 0}, r"'fps' must be > 0, got 0"),
        ({"video": "a.mp4", "query": "x", "start": 3, "end": 2}, r"'end' \(2.0\) must be after"),
    ],
)
def test_bad_video_rows_are_one_named_error(
    tmp_path: Path, row: dict[str, object], message: str
) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match=message):
        load_requests(path)


def test_the_same_video_and_query_over_other_frames_is_another_request() -> None:
    clip = Path("/v/clip.mp4")
    ids = {
        default_id(clip, "q", FrameSelection()),
        default_id(clip, "q", FrameSelection(stride=2)),
        default_id(clip, "q", FrameSelection(stride=2, max_frames=5)),
        default_id(clip, "q", FrameSelection(fps=1.0)),
    }
    assert len(ids) == 4
    assert default_id(clip, "q", FrameSelection()) == default_id(clip, "q") == "clip.mp4:q"


def test_the_commands_frames_are_every_video_rows_default(tmp_path: Path) -> None:
    rows = [
        {"video": "a.mp4", "query": "x"},
        {"video": "a.mp4", "query": "y", "stride": 1, "max_frames": 8},
        {"video": "a.mp4", "query": "z", "start": 1, "end": 2},
        {"image": "one.png", "query": "x"},
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    default = FrameSelection(stride=3, end_s=10.0)
    requests = load_requests(path, frames=default)
    assert [r.frames for r in requests] == [
        default,
        FrameSelection(stride=1, max_frames=8, end_s=10.0),
        FrameSelection(stride=3, start_s=1.0, end_s=2.0),
        None,
    ]
    assert [r.id for r in requests] == [
        "a.mp4[stride=3,end=10]:x",
        "a.mp4[max_frames=8,end=10]:y",
        "a.mp4[stride=3,start=1,end=2]:z",
        "one.png:x",
    ]
    path.write_text(json.dumps({"video": "a.mp4", "query": "x", "start": 12}) + "\n")
    with pytest.raises(DatasetError, match=r":1: 'end' \(10.0\) must be after 'start' \(12.0\)"):
        load_requests(path, frames=default)
