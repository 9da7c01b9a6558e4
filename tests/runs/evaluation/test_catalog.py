"""The catalog names every evaluation dataset once: the loaders, the report and the CLI read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sam3_agent.apps.cli.evaluate import DatasetChoice
from sam3_agent.runs.evaluation.catalog import IMAGE_DATASETS, VIDEO_DATASETS, dataset_title
from sam3_agent.runs.evaluation.datasets import DATASETS, load_samples
from sam3_agent.values.errors import UserError


def test_the_eval_command_offers_exactly_the_catalogs_datasets() -> None:
    assert [c.value for c in DatasetChoice] == [*IMAGE_DATASETS, *VIDEO_DATASETS]


def test_the_image_loader_takes_the_catalogs_image_datasets() -> None:
    assert tuple(IMAGE_DATASETS) == DATASETS
    with pytest.raises(UserError, match="choose one of reasonseg, refcoco"):
        load_samples("ref-davis17", Path("."), "val")


@pytest.mark.parametrize(
    ("name", "title"),
    [("refcoco+", "RefCOCO+"), ("grefcoco", "gRefCOCO"), ("revos", "ReVOS"), ("other", "other")],
)
def test_titles_come_from_the_catalog(name: str, title: str) -> None:
    assert dataset_title(name) == title
