"""What a tool call names as its image: base64 data of any text ends in an image or one
line, never a traceback; the size bound holds before decoding."""

from __future__ import annotations

import base64
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from sam3_agent.apps.mcp.runner import BASE64_NAME, decode_base64, pixels_of, resolve
from sam3_agent.media.fetch import Downloads
from sam3_agent.values.errors import UserError


def png_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((8, 12, 3), np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@given(st.text())
def test_any_text_as_base64_is_an_image_or_one_line(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        fetched = Downloads(Path(folder), max_mb=1)
        try:
            pixels_of(resolve(fetched, None, text, "image"), max_pixels=10**6)
        except UserError as e:
            assert str(e) and "\n" not in str(e)
            assert folder not in str(e)  # the server's own file is never named


@pytest.mark.parametrize(
    "text", [base64.b64encode(png_bytes()).decode(),
             "data:image/png;base64," + base64.b64encode(png_bytes()).decode(),
             "\n".join(base64.encodebytes(png_bytes()).decode().split())],
)  # fmt: skip
def test_base64_plain_as_a_data_url_or_wrapped_decodes(text: str, tmp_path: Path) -> None:
    source = resolve(Downloads(tmp_path), None, text, "image")
    assert source.shown_as == BASE64_NAME
    assert pixels_of(source, max_pixels=10**6).shape == (8, 12, 3)


def test_base64_over_the_download_limit_is_refused_before_decoding() -> None:
    with pytest.raises(UserError, match=r"more than 1 MB \(`--max-download-mb`\)"):
        decode_base64("A" * (2 * 1024 * 1024), max_bytes=1024 * 1024)


@pytest.mark.parametrize(
    ("image", "data", "said"),
    [(None, None, "exactly one of"), ("a.png", "AAAA", "exactly one of"), ("  ", None, "empty"),
     (None, "data:text/plain,hello", "data:<type>;base64")],
)  # fmt: skip
def test_a_call_names_exactly_one_image(
    image: str | None, data: str | None, said: str, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match=said.replace("(", r"\(")):
        resolve(Downloads(tmp_path), image, data, "image")
