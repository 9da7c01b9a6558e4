"""SAM 3 through the HTTP service (``sam3-agent serve-sam3``). An image is uploaded once, raw
RGB or PNG (lossless: the server's hash equals ours), masks back in row order; a video is
streamed up once (a file as it is, a folder as a tar of the frames used), tracked by frames."""

from __future__ import annotations

import hashlib
import logging
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import cv2
import httpx
import numpy as np

from sam3_agent.backends.schemas import (
    RAW_RGB_MIME,
    TAR_MIME,
    ErrorCode,
    SegmentResponse,
    TrackResponse,
    UploadResponse,
    VideoLimits,
    VideoUploadResponse,
)
from sam3_agent.backends.segment_args import check_rgb_image, check_video_source
from sam3_agent.backends.service_client import RemoteHandle, ServiceBackend
from sam3_agent.backends.wire import decode_masks, encode_raw
from sam3_agent.media.video import VideoSource
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.images import RGBImage, image_digest
from sam3_agent.values.tracks import Tracks

logger = logging.getLogger(__name__)

UploadFormat = Literal["raw", "png"]
DEFAULT_TRACK_TIMEOUT_S = 1800.0  # the service answers once the whole clip is tracked
_CHUNK = 1024 * 1024
_KNOWN_VIDEO_UPLOADS = 256


class RemoteEmbedding(RemoteHandle):
    """An image uploaded to the service; keeps the pixels to upload again if evicted."""

    def __init__(
        self, owner: RemoteSegmenter, image: RGBImage, image_id: str, image_size: tuple[int, int]
    ) -> None:
        super().__init__(owner)
        self._image = image
        self.image_id = image_id
        self.image_size = image_size

    def segment(
        self, phrases: Sequence[str], score_threshold: float, exemplars: Exemplars | None = None
    ) -> list[Detections]:
        return self._ask(phrases, score_threshold, exemplars)


class RemoteSegmenter(ServiceBackend):
    """A SAM 3 service as a :class:`~sam3_agent.backends.base.Segmenter`. Thread-safe."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        upload_format: UploadFormat = "raw",
        **connection: Any,
    ) -> None:
        """``upload_format``: ``raw`` RGB bytes (no encoding time: best on a LAN) or ``png``
        (level 1: about half the bytes, seconds of CPU per photo)."""
        if upload_format not in ("raw", "png"):
            raise UserError(f"upload_format must be 'raw' or 'png', got {upload_format!r}")
        super().__init__(url, token, **connection)
        self._upload_format = upload_format

    def embed(self, image: RGBImage) -> RemoteEmbedding:
        """Upload the image unless this client already did; the backbone runs on the server
        at the first segment request."""
        check_rgb_image(image)
        digest = image_digest(image)
        image_id = self._uploaded.get(digest) or self._upload(image, digest)
        return RemoteEmbedding(self, image, image_id, (int(image.shape[0]), int(image.shape[1])))

    def _upload(self, image: RGBImage, digest: str) -> str:
        if self._upload_format == "raw":
            height, width = int(image.shape[0]), int(image.shape[1])
            body = encode_raw(image)
            sent: dict[str, Any] = {
                "params": {"height": height, "width": width},
                "headers": {"Content-Type": RAW_RGB_MIME},
            }
        else:
            bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
            ok, png = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, 1])
            if not ok:
                raise SegmenterError("could not encode the image as PNG for upload")
            body, sent = png.tobytes(), {"headers": {"Content-Type": "image/png"}}
        uploaded = self._post("upload", UploadResponse, "/v1/images", content=body, **sent)
        logger.debug("uploaded image %s", uploaded.image_id[:12])
        self._uploaded.put(digest, uploaded.image_id)
        return uploaded.image_id

    def _answer(
        self,
        embedding: RemoteEmbedding,
        sent: list[str],
        score_threshold: float,
        exemplars: Exemplars | None = None,
    ) -> list[tuple[Detections, str | None]]:
        def request(image_id: str) -> httpx.Response:
            body: dict[str, Any] = {
                "image_id": image_id,
                "phrases": sent,
                "score_threshold": score_threshold,
                "rle_order": "rows",
            }
            if exemplars:  # absent otherwise: a service from before exemplars takes the body
                body["exemplars"] = exemplars.to_json()
            return self._send("POST", "/v1/segment", json=body)

        def reupload() -> str:
            embedding.image_id = self._upload(embedding._image, image_digest(embedding._image))
            return embedding.image_id

        parsed = self._ask(embedding.image_id, request, reupload, "segment", SegmentResponse)
        if len(parsed.results) != len(sent) or tuple(parsed.image_size) != embedding.image_size:
            raise SegmenterError(
                f"SAM 3 service answered {len(parsed.results)} results for an image of "
                f"{parsed.image_size}; expected {len(sent)} for {embedding.image_size}"
            )
        out: list[tuple[Detections, str | None]] = []
        try:
            for result in parsed.results:
                masks = decode_masks(
                    [m.model_dump() for m in result.masks], "rows", embedding.image_size
                )
                found = Detections(
                    masks=masks,
                    boxes=np.asarray(result.boxes, dtype=np.float32).reshape(-1, 4),
                    scores=np.asarray(result.scores, dtype=np.float32),
                )
                out.append((found, result.used_phrase))
        except (ValueError, KeyError, TypeError) as e:
            raise SegmenterError(f"SAM 3 service sent malformed masks: {e}") from e
        return out


class _FileChunks:
    """A file's bytes as chunks, read anew on each iteration (a retry sends the whole body)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __iter__(self) -> Iterator[bytes]:
        with open(self._path, "rb") as file:
            while chunk := file.read(_CHUNK):
                yield chunk


@dataclass(frozen=True)
class _Body:
    path: Path
    size: int
    digest: str
    content_type: str


def _digest(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


@contextmanager
def _upload_body(video: VideoSource) -> Iterator[_Body]:
    """``video``'s file, or a tar of its frames used (a temporary file)."""
    try:
        if video.kind == "file":
            yield _Body(
                video.path,
                video.path.stat().st_size,
                _digest(video.path),
                "application/octet-stream",
            )
            return
        with tempfile.TemporaryDirectory(prefix="sam3-agent-upload-") as folder:
            tar_path = Path(folder) / "frames.tar"
            with tarfile.open(tar_path, mode="w", format=tarfile.PAX_FORMAT) as archive:
                for index in video.indices:
                    name = video.frame_names[index]
                    frame = video.path / name
                    info = tarfile.TarInfo(name)
                    info.size = frame.stat().st_size
                    info.mode = 0o644
                    info.mtime = 0  # the same frames make the same bytes (and the same id)
                    with open(frame, "rb") as data:
                        archive.addfile(info, data)
            yield _Body(tar_path, tar_path.stat().st_size, _digest(tar_path), TAR_MIME)
    except OSError as e:
        raise SegmenterError(
            f"cannot read {video.path} to upload it to the SAM 3 service: {e.strerror or e}"
        ) from e


class RemoteVideoEmbedding(RemoteHandle):
    """A video uploaded to the service; tracks phrases there."""

    def __init__(self, owner: RemoteVideoSegmenter, video: VideoSource, video_id: str) -> None:
        super().__init__(owner)
        self.video = video
        self.video_id = video_id

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        return self._ask(phrases, score_threshold)


class RemoteVideoSegmenter(ServiceBackend):
    """A SAM 3 service that tracks videos. Thread-safe."""

    default_timeout_s = DEFAULT_TRACK_TIMEOUT_S
    _known_uploads = _KNOWN_VIDEO_UPLOADS
    _unknown = ErrorCode.UNKNOWN_VIDEO
    _evicted = "service evicted video %s; uploading it again"
    _limits: VideoLimits | None = None  # read by check()

    def check(self) -> None:
        """:meth:`ServiceBackend.check`, and that the service tracks videos."""
        if self._limits is not None:
            return
        super().check()
        response = self._send("GET", "/v1/videos")
        if response.status_code == 404:
            raise SegmenterError(
                f"the SAM 3 service at {self.url} does not track videos; start it with "
                "`sam3-agent serve-sam3 --video`"
            )
        self._raise_for_error(response, "video limits")
        self._limits = self._parse(VideoLimits, response)

    def open(self, video: VideoSource) -> RemoteVideoEmbedding:
        """Upload ``video`` (its file, or its frames used) unless this client already did."""
        check_video_source(video)
        return RemoteVideoEmbedding(self, video, self._upload(video, skip_known=True))

    def _upload(self, video: VideoSource, *, skip_known: bool) -> str:
        with _upload_body(video) as body:
            known = self._uploaded.get(body.digest) if skip_known else None
            if known is not None:
                return known
            self._check_bounds(video, body)
            uploaded = self._post(
                "video upload",
                VideoUploadResponse,
                "/v1/videos",
                content=_FileChunks(body.path),
                headers={"Content-Type": body.content_type, "Content-Length": str(body.size)},
            )
        logger.debug("uploaded video %s (%d bytes)", uploaded.video_id[:12], body.size)
        self._uploaded.put(body.digest, uploaded.video_id)
        return uploaded.video_id

    def _check_bounds(self, video: VideoSource, body: _Body) -> None:
        """Refuse a video over the bounds :meth:`check` read before sending a byte (a refusal
        mid-upload may look like a broken connection)."""
        limits = self._limits
        if limits is None:
            return
        frames = video.source_frames if video.kind == "file" else video.frame_count
        if body.size > limits.max_video_bytes:
            raise SegmenterError(
                f"the video is {body.size} bytes; the SAM 3 service at {self.url} takes at "
                f"most {limits.max_video_bytes} (serve-sam3 --max-video-mb)"
            )
        if frames > limits.max_video_frames:
            raise SegmenterError(
                f"the video has {frames} frames; the SAM 3 service at {self.url} takes at "
                f"most {limits.max_video_frames} (serve-sam3 --max-video-frames)"
            )

    def _answer(
        self,
        embedding: RemoteVideoEmbedding,
        sent: list[str],
        score_threshold: float,
        exemplars: Exemplars | None = None,  # never given: a video handle asks without them
    ) -> list[tuple[Tracks, str | None]]:
        video = embedding.video
        # A file is uploaded whole: the frames used are named by their index in it. A tar
        # holds only the frames used, in order.
        frames = list(video.indices) if video.kind == "file" else list(range(video.frame_count))
        body = {"phrases": sent, "score_threshold": score_threshold, "frames": frames}

        def request(video_id: str) -> httpx.Response:
            return self._send("POST", f"/v1/videos/{video_id}/track", json=body)

        def reupload() -> str:
            embedding.video_id = self._upload(video, skip_known=False)
            return embedding.video_id

        parsed = self._ask(embedding.video_id, request, reupload, "track", TrackResponse)
        if (
            len(parsed.results) != len(sent)
            or tuple(parsed.size) != video.size
            or len(parsed.frames_used) != video.frame_count
        ):
            raise SegmenterError(
                f"SAM 3 service answered {len(parsed.results)} results over "
                f"{len(parsed.frames_used)} frames of {tuple(parsed.size)}; expected "
                f"{len(sent)} over {video.frame_count} frames of {video.size}"
            )
        out: list[tuple[Tracks, str | None]] = []
        for result in parsed.results:
            found = result.tracks
            if found.frame_count != video.frame_count or tuple(found.size) != video.size:
                raise SegmenterError(
                    f"SAM 3 service sent tracks over {found.frame_count} frames of "
                    f"{tuple(found.size)} for a video of {video.frame_count} frames of "
                    f"{video.size}"
                )
            # TracksJson already checked them to fit their frames and size.
            out.append((Tracks.from_json(found.model_dump(mode="json")), result.used_phrase))
        return out
