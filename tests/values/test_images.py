from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from sam3_agent.values.errors import ImageLoadError
from sam3_agent.values.images import (
    BACKGROUND,
    EncodedImage,
    downscale,
    image_digest,
    image_size_as_displayed,
    load_image,
)


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
        (np.full((5, 7, 3), 2.0, dtype=np.float32), r"\[0, 1\]"),
        (np.full((5, 7, 3), np.nan, dtype=np.float32), "NaN"),
        (np.zeros((5, 7, 3), dtype=np.int64), "dtype int64"),
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


# ------------------------------------------------------------------ orientation, modes, bombs

# EXIF orientation -> how the stored pixels become the displayed ones (PIL's transposes).
_TRANSPOSES: dict[int, list[Image.Transpose]] = {
    1: [],
    2: [Image.Transpose.FLIP_LEFT_RIGHT],
    3: [Image.Transpose.ROTATE_180],
    4: [Image.Transpose.FLIP_TOP_BOTTOM],
    5: [Image.Transpose.TRANSPOSE],
    6: [Image.Transpose.ROTATE_270],
    7: [Image.Transpose.TRANSVERSE],
    8: [Image.Transpose.ROTATE_90],
}


def _with_orientation(pixels: np.ndarray, orientation: int, fmt: str = "PNG") -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, fmt, exif=exif.tobytes())
    return buf.getvalue()


def _displayed(pixels: np.ndarray, orientation: int) -> np.ndarray:
    pil = Image.fromarray(pixels)
    for op in _TRANSPOSES[orientation]:
        pil = pil.transpose(op)
    return np.asarray(pil)


def test_phone_photo_is_loaded_as_displayed(tmp_path: Path) -> None:
    # A phone JPEG stored 600x400 landscape with Orientation=6 is shown portrait.
    path = tmp_path / "phone.jpg"
    path.write_bytes(_with_orientation(np.zeros((400, 600, 3), np.uint8), 6, "JPEG"))
    assert load_image(path).shape == (600, 400, 3)
    assert load_image(path.read_bytes()).shape == (600, 400, 3)
    with Image.open(path) as pil:
        assert load_image(pil).shape == (600, 400, 3)
        assert pil.size == (600, 400)  # the caller's image is not modified
    assert load_image(path, exif_orientation=False).shape == (400, 600, 3)
    assert image_size_as_displayed(path) == (600, 400)
    assert image_size_as_displayed(path, exif_orientation=False) == (400, 600)


_small_rgb = st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(0, 2**32 - 1)).map(
    lambda t: np.random.default_rng(t[2]).integers(0, 256, (t[0], t[1], 3), dtype=np.uint8)
)


@given(pixels=_small_rgb, orientation=st.integers(1, 8), as_bytes=st.booleans())
@settings(max_examples=60, deadline=None)
def test_every_orientation_matches_what_viewers_show(
    pixels: np.ndarray, orientation: int, as_bytes: bool
) -> None:
    data = _with_orientation(pixels, orientation)
    given_image: bytes | Image.Image = data if as_bytes else Image.open(io.BytesIO(data))
    np.testing.assert_array_equal(load_image(given_image), _displayed(pixels, orientation))
    np.testing.assert_array_equal(load_image(data, exif_orientation=False), pixels)


def test_16bit_grayscale_png_is_rescaled_not_white(tmp_path: Path) -> None:
    ramp = np.linspace(0, 65535, 64 * 48).astype(np.uint16).reshape(48, 64)
    path = tmp_path / "depth.png"
    Image.fromarray(ramp).save(path)
    with Image.open(path) as pil:
        assert pil.mode.startswith("I")  # what PIL makes of it
    out = load_image(path)
    assert out.min() == 0 and out.max() == 255
    np.testing.assert_array_equal(out[:, :, 0], np.round(ramp / 257).astype(np.uint8))
    assert (out[:, :, 0] == out[:, :, 2]).all()


def test_transparency_is_composited_onto_the_background() -> None:
    rgba = np.zeros((2, 2, 4), np.uint8)
    rgba[0, 0] = (255, 0, 0, 255)  # opaque red stays red
    rgba[0, 1] = (255, 0, 0, 0)  # fully transparent shows the background
    rgba[1, 0] = (0, 0, 0, 128)  # half-transparent black is grey
    out = load_image(Image.fromarray(rgba, "RGBA"))
    assert out[0, 0].tolist() == [255, 0, 0]
    assert out[0, 1].tolist() == list(BACKGROUND)
    assert out[1, 0].tolist() == [127, 127, 127]
    np.testing.assert_array_equal(load_image(rgba), out)
    la = Image.fromarray(np.array([[[10, 0]]], np.uint8), "LA")
    assert load_image(la)[0, 0].tolist() == list(BACKGROUND)
    palette = Image.new("P", (2, 1))
    palette.putpalette([0, 0, 0, 200, 10, 10] + [0] * 762)
    palette.putpixel((1, 0), 1)
    palette.info["transparency"] = 0
    assert load_image(palette).tolist() == [[list(BACKGROUND), [200, 10, 10]]]


_MODES = ["1", "L", "P", "RGB", "RGBA", "LA", "CMYK", "YCbCr", "I;16", "I", "F"]


@given(
    mode=st.sampled_from(_MODES),
    height=st.integers(1, 12),
    width=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
    orientation=st.integers(1, 8),
    fmt=st.sampled_from(["PNG", "TIFF", "WEBP"]),
)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_mode_size_and_orientation_loads_as_rgb(
    mode: str, height: int, width: int, seed: int, orientation: int, fmt: str
) -> None:
    rng = np.random.default_rng(seed)
    base = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    if mode in ("I;16", "I"):
        pil = Image.fromarray(rng.integers(0, 65536, (height, width)).astype(np.uint16))
        pil = pil if mode == "I;16" else pil.convert("I")
    elif mode == "F":
        pil = Image.fromarray(rng.random((height, width)).astype(np.float32) * 1000 - 500)
    else:
        pil = base.convert(mode)
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = orientation
    try:
        # A deprecated save (Pillow 12: I mode as PNG) is what a later Pillow refuses: treat
        # it as refused now, so the test is the same on every Pillow.
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            pil.save(buf, fmt, exif=exif.tobytes())
    except (OSError, ValueError, KeyError, DeprecationWarning):
        buf = None  # this format cannot store this mode: test the PIL image itself
    sources: list[object] = [pil] if buf is None else [pil, buf.getvalue()]
    swapped = orientation in (5, 6, 7, 8) and buf is not None
    for source in sources:
        try:
            out = load_image(source)  # type: ignore[arg-type]
        except ImageLoadError as e:
            assert "\n" not in str(e)  # refused in one line, never a library exception
            continue
        assert out.dtype == np.uint8 and out.flags.c_contiguous and out.shape[2] == 3
        expected = (width, height) if swapped and isinstance(source, bytes) else (height, width)
        assert out.shape[:2] == expected


def test_high_bit_depth_arrays_are_rescaled() -> None:
    assert load_image(np.full((2, 3), 65535, np.uint16)).max() == 255
    assert load_image(np.full((2, 3, 3), 257 * 100, np.uint16))[0, 0].tolist() == [100] * 3
    assert load_image(np.full((2, 3), 0.5, np.float32))[0, 0].tolist() == [128] * 3
    assert load_image(np.ones((2, 3, 1), bool)).max() == 255


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares ``width x height`` 1-bit pixels and holds a tiny IDAT."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


def test_decompression_bomb_is_refused_from_the_header(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(_png_header_only(15000, 15000))
    for source in (bomb, bomb.read_bytes()):
        with pytest.raises(ImageLoadError, match="15000x15000") as caught:
            load_image(source)
        assert "\n" not in str(caught.value)


def test_our_pixel_limit_applies_not_pils(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "wide.png"
    Image.new("L", (300, 200)).save(path)
    # PIL's global limit would refuse this image; ours (configurable) is the one that applies.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    assert load_image(path, max_pixels=60_000).shape == (200, 300, 3)
    assert Image.MAX_IMAGE_PIXELS == 1000  # restored after the decode
    with pytest.raises(ImageLoadError, match="over the limit of 59999"):
        load_image(path, max_pixels=59_999)
    with pytest.raises(ImageLoadError, match="over the limit"):
        load_image(np.zeros((200, 300, 3), np.uint8), max_pixels=100)


def test_cli_refuses_a_bomb_in_one_line_with_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sam3_agent.apps.cli.main import app

    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(_png_header_only(15000, 15000))
    result = CliRunner().invoke(app, ["run", str(bomb), "a dog", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "image too large" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    small = tmp_path / "small.png"
    Image.new("RGB", (100, 100)).save(small)
    result = CliRunner().invoke(
        app, ["run", str(small), "a dog", "--max-pixels", "999", "--out", str(tmp_path / "p")]
    )
    assert result.exit_code == 2 and "over the limit of 999" in result.output


def test_agent_segments_and_reports_the_displayed_frame(tmp_path: Path) -> None:
    import json

    from sam3_agent.agent.loop import Sam3Agent
    from sam3_agent.values.config import AgentConfig
    from tests.support.fakes import FakeSegmenter, ScriptedChatModel, tool

    path = tmp_path / "phone.jpg"
    path.write_bytes(_with_orientation(np.zeros((400, 600, 3), np.uint8), 6, "JPEG"))
    seen: list[tuple[int, ...]] = []

    def record(image: np.ndarray) -> object:
        from sam3_agent.values.detections import Detections

        seen.append(image.shape)
        return Detections.empty(*image.shape[:2])

    segmenter = FakeSegmenter({"child": record})  # type: ignore[dict-item]
    chat = ScriptedChatModel(
        replies=[tool("segment_phrase", text_prompt="child"), tool("report_no_mask")]
    )
    result = Sam3Agent(segmenter, chat).run(path, "the leftmost child", output_dir=tmp_path / "o")
    assert seen == [(600, 400, 3)]
    assert result.image_size == (600, 400)
    written = json.loads((tmp_path / "o" / "result.json").read_text())
    assert written["image"]["height"] == 600 and written["image"]["width"] == 400

    small = Sam3Agent(FakeSegmenter(), ScriptedChatModel(), AgentConfig(max_image_pixels=1000))
    with pytest.raises(ImageLoadError, match="over the limit of 1000"):
        small.run(path, "the leftmost child")


@pytest.mark.parametrize("typed", ["https://example.com/a.png", "HTTP:/example.com/a.png"])
@pytest.mark.parametrize("as_path", [False, True])
def test_urls_are_refused_by_one_check_for_images_and_videos(typed: str, as_path: bool) -> None:
    from sam3_agent.media.video import VideoLoadError, open_video
    from sam3_agent.values.images import refuse_url

    source = Path(typed) if as_path else typed
    shown = typed.split(":", 1)[0] + "://example.com/a.png"
    with pytest.raises(ImageLoadError, match=f"^{shown} is a URL; images are read from files"):
        load_image(source)
    with pytest.raises(VideoLoadError, match=f"^{shown} is a URL; videos are read from files"):
        open_video(source)
    with pytest.raises(VideoLoadError, match=r"clips are read from files: download it first$"):
        refuse_url(source, "clips", VideoLoadError)
    refuse_url("photo.jpg", "images")  # a file name passes
