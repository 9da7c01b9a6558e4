"""``scripts.snapshot_sessions``: the before/after check of a restructure finds equal what is
equal but for times, and names each file that differs otherwise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scripts import snapshot_sessions


def test_a_session_made_and_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tiny_sam3_dir: Path, tiny_sam3_video_dir: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "models").mkdir(parents=True)  # the suite's tiny models, not built again
    (old / "models" / "sam3").symlink_to(tiny_sam3_dir)
    (old / "models" / "sam3-video").symlink_to(tiny_sam3_video_dir)
    assert snapshot_sessions.main(["make", str(old), "--only", "^image-tags-sam3-default$"]) == 0
    run = old / "image-tags-sam3-default"
    doc = json.loads((run / "result.json").read_text())
    assert doc["status"] == "masks" and (run / "overlay.png").is_file()
    assert [p.name for p in old.iterdir() if p.name.startswith(("image", "video"))] == [run.name]

    shutil.copytree(old, new, symlinks=True)
    doc["timings_s"] = {"total": 123.0}  # times aside
    (new / run.name / "result.json").write_text(json.dumps(doc))
    assert snapshot_sessions.compare(old, new) == 0

    trace = (new / run.name / "trace.jsonl").read_text().replace("round 1", "round one", 1)
    (new / run.name / "trace.jsonl").write_text(trace)
    (new / run.name / "overlay.png").unlink()
    capsys.readouterr()
    assert snapshot_sessions.compare(old, new) == 1
    said = capsys.readouterr().out.splitlines()
    assert f"differs: {run.name}/trace.jsonl" in said
    assert f"only in {old}: {run.name}/overlay.png" in said
