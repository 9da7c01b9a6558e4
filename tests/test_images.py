from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sam3_agent.errors import ImageLoadError
from sam3_agent.images import EncodedImage, downscale, image_digest, load_image


def test_load_formats(tmp_path: Path) -> None:
    rgba = np.zeros((5, 7, 4), dtype=np.uint8)
    gray = np.zeros((5, 7), dtype=np.uint8)
    for arr in (rgba, gray):
        assert load_image(arr).shape == (5, 7, 3)
    Image.fromarray(gray).save(tmp_path / "g.png")
    assert load_image(tmp_path / "g.png").shape == (5, 7, 3)


@pytest.mark.parametrize(
    ("given", "match"),
    [
        (np.zeros((5, 7, 3), dtype=np.float32), "uint8"),
        (np.zeros((5, 7, 2), dtype=np.uint8), "shape"),
        (np.zeros((0, 7, 3), dtype=np.uint8), "empty"),
        (42, "unsupported image type int"),
    ],
)
def test_bad_arrays(given: object, match: str) -> None:
    with pytest.raises(ImageLoadError, match=match):
        load_image(given)  # type: ignore[arg-type]


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(ImageLoadError, match="not found"):
        load_image(tmp_path / "missing.png")
    with pytest.raises(ImageLoadError, match="not a file"):
        load_image(tmp_path)
    truncated = tmp_path / "t.png"
    Image.fromarray(np.zeros((64, 64, 3), dtype=np.uint8)).save(truncated)
    truncated.write_bytes(truncated.read_bytes()[:60])
    with pytest.raises(ImageLoadError, match="cannot read image"):
        load_image(truncated)


def test_downscale_bounds_the_longer_side() -> None:
    img = np.zeros((3000, 2000, 3), dtype=np.uint8)
    assert downscale(img, 1024).shape == (1024, 683, 3)
    small = np.zeros((100, 50, 3), dtype=np.uint8)
    assert downscale(small, 1024) is small


def test_encoding_once_and_hashing() -> None:
    img = np.full((10, 20, 3), 128, dtype=np.uint8)
    jpg = EncodedImage.encode(img, "a")
    png = EncodedImage.encode(img, "a", fmt="png")
    assert jpg.name == "a.jpg" and jpg.mime == "image/jpeg" and (jpg.width, jpg.height) == (20, 10)
    assert png.name == "a.png" and png.to_pil().size == (20, 10)
    assert jpg.data_url().startswith("data:image/jpeg;base64,")
    assert image_digest(img) == image_digest(img.copy())
    assert image_digest(img) != image_digest(img[:, :10])


def test_derived_forms_are_computed_once_per_image() -> None:
    img = EncodedImage.encode(np.full((10, 20, 3), 7, dtype=np.uint8), "a")
    assert img.data_url() is img.data_url()
    assert img.to_pil() is img.to_pil()
    assert img.to_pil().size == (20, 10)
