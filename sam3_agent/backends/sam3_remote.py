"""SAM 3 through the HTTP service (``sam3-agent serve-sam3``): each image uploaded once, raw
RGB or PNG (lossless: the server's content hash equals ours), masks back in row order."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

import cv2
import httpx
import numpy as np

from sam3_agent.backends.schemas import RAW_RGB_MIME, SegmentResponse, UploadResponse
from sam3_agent.backends.segment_args import check_rgb_image, clean_phrase
from sam3_agent.backends.service_client import RemoteHandle, ServiceBackend
from sam3_agent.backends.wire import decode_masks, encode_raw
from sam3_agent.values.detections import Detections
from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.images import RGBImage, image_digest

logger = logging.getLogger(__name__)

UploadFormat = Literal["raw", "png"]


class RemoteEmbedding(RemoteHandle):
    """An image uploaded to the service; keeps the pixels to upload again if evicted."""

    def __init__(
        self, owner: RemoteSegmenter, image: RGBImage, image_id: str, image_size: tuple[int, int]
    ) -> None:
        super().__init__(owner)
        self._image = image
        self.image_id = image_id
        self.image_size = image_size

    def segment(self, phrases: Sequence[str], score_threshold: float) -> list[Detections]:
        return self._ask(phrases, score_threshold)


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
        image_id = self._known(digest) or self._upload(image, digest)
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
        return self._uploaded_as(digest, uploaded.image_id)

    def _answer(
        self, embedding: RemoteEmbedding, phrases: list[str], score_threshold: float
    ) -> list[Detections]:
        # Sent cleaned (the service would clean them the same way): a lone surrogate
        # cannot even be encoded as UTF-8.
        sent = [clean_phrase(p) for p in phrases]

        def request(image_id: str) -> httpx.Response:
            body = {
                "image_id": image_id,
                "phrases": sent,
                "score_threshold": score_threshold,
                "rle_order": "rows",
            }
            return self._send("POST", "/v1/segment", json=body)

        def reupload() -> str:
            embedding.image_id = self._upload(embedding._image, image_digest(embedding._image))
            return embedding.image_id

        parsed = self._ask(embedding.image_id, request, reupload, "segment", SegmentResponse)
        if len(parsed.results) != len(phrases) or tuple(parsed.image_size) != embedding.image_size:
            raise SegmenterError(
                f"SAM 3 service answered {len(parsed.results)} results for an image of "
                f"{parsed.image_size}; expected {len(phrases)} for {embedding.image_size}"
            )
        out: list[Detections] = []
        try:
            for phrase, text, result in zip(phrases, sent, parsed.results, strict=True):
                masks = decode_masks(
                    [m.model_dump() for m in result.masks], "rows", embedding.image_size
                )
                out.append(
                    Detections(
                        masks=masks,
                        boxes=np.asarray(result.boxes, dtype=np.float32).reshape(-1, 4),
                        scores=np.asarray(result.scores, dtype=np.float32),
                    )
                )
                embedding._remember(phrase, text, result.used_phrase)
        except (ValueError, KeyError, TypeError) as e:
            raise SegmenterError(f"SAM 3 service sent malformed masks: {e}") from e
        return out
