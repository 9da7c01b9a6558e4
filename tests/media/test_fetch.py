""":mod:`sam3_agent.media.fetch` against a web server on 127.0.0.1: every refusal one named
line with the URL shown, nothing left behind, one download per URL."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from sam3_agent.media.fetch import Downloads, downloads, shown, url_of
from sam3_agent.values.errors import DownloadError
from tests.support.media_server import MediaServer, Route, media_server

MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 64


def png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 120, np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def server() -> Iterator[MediaServer]:
    with media_server() as running:
        running.routes.update(
            {
                "/cat.png": Route(png()),
                "/clip.mp4": Route(MP4),
                "/missing.jpg": Route(b"gone", 404),
                "/broken.jpg": Route(b"oops", 500),
                "/page.jpg": Route(b"<!doctype html><html>hello</html>"),
                "/big.png": Route(png() + b"\x00" * (2 << 20)),
                "/big-unsized.png": Route(png() + b"\x00" * (2 << 20), length=False),
                "/slow.png": Route(png(), stall_s=3.0),
                "/loop": Route(status=302, headers={"Location": "/loop"}),
                "/to-ftp": Route(status=301, headers={"Location": "ftp://127.0.0.1/cat.png"}),
                "/hop": Route(status=302, headers={"Location": "/cat.png"}),
            }
        )
        yield running


def fetched(directory: Path, **limits: float) -> Downloads:
    return Downloads(directory, int(limits.pop("max_mb", 1)), **limits)


def test_an_image_and_a_video_are_fetched_with_their_digest(
    server: MediaServer, tmp_path: Path
) -> None:
    got = fetched(tmp_path).fetch(server.url("/cat.png"), "image")
    assert got.path.suffix == ".png" and got.path.read_bytes() == png()
    assert got.sha256 == hashlib.sha256(png()).hexdigest() and got.stem == "cat"
    assert got.record() == {"path": got.url, "url": got.url, "sha256": got.sha256}
    video = fetched(tmp_path).fetch(server.url("/clip.mp4"), "video")
    assert video.path.suffix == ".mp4"


def test_one_download_per_url_and_redirects_followed(server: MediaServer, tmp_path: Path) -> None:
    run = fetched(tmp_path)
    before = server.hits("/hop")
    first = run.fetch(server.url("/hop"), "image")
    assert run.fetch(server.url("/hop"), "image") is first
    assert server.hits("/hop") == before + 1 and first.path.read_bytes() == png()


@pytest.mark.parametrize(
    ("path", "kind", "said"),
    [
        ("/missing.jpg", "image", "HTTP 404"),
        ("/broken.jpg", "image", "HTTP 500"),
        ("/page.jpg", "image", "the bytes fetched are not an image"),
        ("/cat.png", "video", "the bytes fetched are not a video"),
        ("/big.png", "image", "over the limit of 1 MB (`max_download_mb`)"),
        ("/big-unsized.png", "image", "over the limit of 1 MB (`max_download_mb`)"),
        ("/loop", "image", "more than 5 redirects"),
        ("/to-ftp", "image", "redirected to ftp://127.0.0.1/cat.png, which is not http(s)"),
    ],
)
def test_each_failure_is_one_named_line_and_leaves_nothing(
    server: MediaServer, tmp_path: Path, path: str, kind: str, said: str
) -> None:
    url = server.url(path)
    with pytest.raises(DownloadError) as caught:
        fetched(tmp_path).fetch(url, kind)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"{url}: ") and said in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_a_declared_size_over_the_limit_is_refused_before_the_body(
    server: MediaServer, tmp_path: Path
) -> None:
    with pytest.raises(DownloadError, match=r": \d+ bytes, over the limit"):
        fetched(tmp_path).fetch(server.url("/big.png"), "image")


def test_a_body_that_stalls_past_the_read_timeout_is_refused(
    server: MediaServer, tmp_path: Path
) -> None:
    with pytest.raises(DownloadError, match="timed out"):
        fetched(tmp_path, read_timeout_s=0.5).fetch(server.url("/slow.png"), "image")
    assert list(tmp_path.iterdir()) == []


def test_nothing_listening_is_one_line(tmp_path: Path) -> None:
    with media_server() as gone:
        url = gone.url("/x.png")
    with pytest.raises(DownloadError, match=r"^http://127\.0\.0\.1:\d+/x\.png: cannot fetch"):
        fetched(tmp_path).fetch(url, "image")


@given(
    scheme=st.from_regex(r"[a-z][a-z0-9+.\-]{1,10}", fullmatch=True).filter(
        lambda s: s not in ("http", "https")
    ),
    rest=st.text(max_size=40),
)
@settings(max_examples=60, deadline=None)
def test_every_other_scheme_is_refused_in_one_line(scheme: str, rest: str) -> None:
    url = f"{scheme}://{rest}"
    assert url_of(url) == url
    with pytest.raises(DownloadError) as caught:
        Downloads(Path("/nonexistent-never-written")).fetch(url, "image")
    message = str(caught.value)
    assert "only http:// and https:// URLs are fetched" in message
    assert message.isprintable()


@given(rest=st.text(max_size=40))
@settings(max_examples=40, deadline=None)
def test_any_text_after_an_http_host_is_one_line_never_a_library_error(rest: str) -> None:
    # Nothing listens on port 9 here: every URL httpx accepts fails to connect; the ones it
    # refuses (control bytes, spaces in the host) must fail the same way, as one line.
    url = f"http://127.0.0.1:9/{rest}"
    with downloads() as run:
        with pytest.raises(DownloadError) as caught:
            run.fetch(url, "image")
        assert not any(run.directory.iterdir()) if run.directory.exists() else True
    assert str(caught.value).isprintable()


@pytest.mark.parametrize("typed", ["data:image/png;base64,AAAA", "file:///etc/passwd", "s3://b/k"])
def test_data_file_and_s3_urls_are_refused(typed: str) -> None:
    with downloads() as run, pytest.raises(DownloadError, match="only http:// and https://"):
        run.resolve(typed, "image")


@pytest.mark.parametrize("path", ["photo.jpg", "C:/photos/a.jpg", "a:b.png", "dir/clip.mp4"])
def test_paths_are_no_urls(path: str) -> None:
    assert url_of(path) is None and url_of(Path(path)) is None


def test_a_path_keeps_both_slashes_and_a_password_is_not_shown() -> None:
    assert url_of(Path("https://x.org/a.png")) == "https://x.org/a.png"
    assert shown("https://me:secret@x.org/a\x1b[31m.png") == "https://me:***@x.org/a\\x1b[31m.png"
