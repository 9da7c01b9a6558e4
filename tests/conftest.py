"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_sam3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a tiny random SAM 3 model + processor (``save_pretrained``)."""
    from tests.tiny_sam3 import save_tiny_sam3

    return save_tiny_sam3(tmp_path_factory.mktemp("tiny_sam3"))
