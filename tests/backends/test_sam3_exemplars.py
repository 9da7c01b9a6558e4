"""Visual exemplars on the tiny in-process SAM 3: the boxes reach ``Sam3Model.forward`` where
they lie on the image, against features computed once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sam3_agent.backends.sam3_local import Sam3Segmenter
from sam3_agent.values.detections import Exemplars
from tests.backends.test_sam3_local import count_backbone_runs, make_image


@pytest.fixture
def segmenter(tiny_sam3_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Sam3Segmenter:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return Sam3Segmenter.from_pretrained(tiny_sam3_dir, device="cpu", dtype="float32")


def spy_forward(segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    model = segmenter._model
    original: Callable[..., Any] = model.forward
    seen: list[dict[str, Any]] = []

    def spied(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spied)
    return seen


def test_exemplar_boxes_reach_forward_in_pixel_correct_positions(
    segmenter: Sam3Segmenter, monkeypatch: pytest.MonkeyPatch
) -> None:
    height, width = 120, 90
    image = make_image(3, height, width)
    runs = count_backbone_runs(segmenter, monkeypatch)
    seen = spy_forward(segmenter, monkeypatch)
    embedding = segmenter.embed(image)
    exemplars = Exemplars(((9, 12, 45, 60), (0, 0, 90, 120)), (True, False))
    plain = embedding.segment(["cat"], 0.0)
    found = embedding.segment(["cat", "dog"], 0.0, exemplars)
    assert len(plain) == 1 and len(found) == 2
    assert runs == [1]  # one backbone run for the phrase alone and the phrases with exemplars
    assert "input_boxes" not in seen[0]
    boxes, labels = seen[1]["input_boxes"], seen[1]["input_boxes_labels"]
    # cxcywh in [0, 1] of the original image, one copy per phrase.
    expected = torch.tensor(
        [[27 / width, 36 / height, 36 / width, 48 / height], [0.5, 0.5, 1.0, 1.0]]
    )
    assert boxes.shape == (2, 2, 4) and labels.tolist() == [[1, 0], [1, 0]]
    for b in range(2):
        torch.testing.assert_close(boxes[b], expected)


def test_exemplars_change_the_answer(segmenter: Sam3Segmenter) -> None:
    embedding = segmenter.embed(make_image(4))
    plain = embedding.segment(["cat"], 0.0)[0]
    boxed = embedding.segment(["cat"], 0.0, Exemplars(((5, 5, 40, 40),), (True,)))[0]
    assert not np.array_equal(plain.scores, boxed.scores)
