"""The SAM 3 service's video endpoints: ``GET /v1/videos`` (the limits), ``POST /v1/videos``
(stored under the body's SHA-256) and ``POST /v1/videos/{video_id}/track``."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import fields, replace

from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from sam3_agent.apps.service.intake import (
    Gate,
    ServiceError,
    content_type,
    read_json,
    refuse_declared_over,
)
from sam3_agent.apps.service.limits import SMALL_BODY_BYTES, ServiceLimits
from sam3_agent.apps.service.video_store import (
    StoredVideo,
    VideoStore,
    check_video,
    receive_to_file,
    scrub,
)
from sam3_agent.backends.base import VideoSegmenter, phrase_as_read
from sam3_agent.backends.schemas import (
    TAR_MIME,
    VIDEO_ID_PATTERN,
    ErrorCode,
    TrackRequest,
    TrackResponse,
    TrackResult,
    TracksJson,
    VideoLimits,
    VideoUploadResponse,
)
from sam3_agent.backends.segment_args import clean_phrase
from sam3_agent.media.video import VideoLoadError, VideoSource
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import SegmenterError, UserError
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

_VIDEO_ID = re.compile(VIDEO_ID_PATTERN)
# A track request's body: the phrases, and up to one frame index per frame (digits, comma).
_FRAME_INDEX_BYTES = 12


def add_video_routes(
    app: FastAPI,
    segmenter: VideoSegmenter | None,
    store: VideoStore | None,
    bounds: ServiceLimits,
    uploads: Gate,
    tracks: Gate,
    authorize: Callable[[Request], None],
) -> None:
    """Add the video endpoints to ``app`` (no segmenter and store: video is off)."""
    track_limit = SMALL_BODY_BYTES + _FRAME_INDEX_BYTES * bounds.max_video_frames

    def enabled(request: Request) -> tuple[VideoSegmenter, VideoStore]:
        authorize(request)
        if segmenter is None or store is None:
            raise ServiceError(
                404,
                ErrorCode.NO_VIDEO,
                "this SAM 3 service does not track videos; start it with serve-sam3 --video",
            )
        return segmenter, store

    @app.get("/v1/videos")
    async def video_limits(request: Request) -> VideoLimits:
        enabled(request)
        return VideoLimits(**{name: getattr(bounds, name) for name in VideoLimits.model_fields})

    @app.post("/v1/videos")
    async def upload_video(request: Request) -> VideoUploadResponse:
        _, store = enabled(request)
        refuse_declared_over(request, bounds.max_video_bytes)
        async with uploads.hold():
            incoming = store.incoming()
            video_id = await receive_to_file(request, incoming, bounds.max_video_bytes)
            tar = content_type(request) == TAR_MIME
            checked = await run_in_threadpool(check_video, video_id, incoming, tar, bounds)
            stored = store.add(checked)
        source = stored.source
        logger.info(
            "stored video %s (%d frames, %dx%d, %d bytes)",
            video_id[:12],
            source.source_frames,
            source.size[1],
            source.size[0],
            stored.nbytes,
        )
        return VideoUploadResponse(
            video_id=stored.video_id,
            kind=stored.kind,
            frame_count=source.source_frames,
            size=source.size,
            fps=source.fps,
            note=source.note,
        )

    @app.post("/v1/videos/{video_id}/track")
    async def track(video_id: str, request: Request) -> Response:
        segmenter, store = enabled(request)
        if not _VIDEO_ID.fullmatch(video_id):
            raise _unknown(video_id)
        refuse_declared_over(request, track_limit)
        async with tracks.hold():
            req = await read_json(request, track_limit, TrackRequest)
            with store.use(video_id) as stored:
                if stored is None:
                    raise _unknown(video_id)
                source = _frames_tracked(stored, req)
                answer = await run_in_threadpool(_track_sync, segmenter, stored, source, req)
        return Response(content=answer, media_type="application/json")


def _unknown(video_id: str) -> ServiceError:
    shown = video_id if _VIDEO_ID.fullmatch(video_id) else ascii(video_id[:80])
    return ServiceError(
        404,
        ErrorCode.UNKNOWN_VIDEO,
        f"unknown video id {shown}; upload it to /v1/videos again",
    )


def _frames_tracked(stored: StoredVideo, req: TrackRequest) -> VideoSource:
    """The stored video with the request's frames (422 when none or out of range)."""
    video = stored.source
    if req.frames is not None:
        if req.frames[-1] >= video.source_frames:
            raise ServiceError(
                422,
                ErrorCode.INVALID,
                f"frame {req.frames[-1]} is out of range: the video has {video.source_frames} "
                f"frames (0..{video.source_frames - 1})",
            )
        return replace(video, indices=tuple(req.frames))
    try:
        selection = {f.name: getattr(req, f.name) for f in fields(FrameSelection)}
        return video.reselect(FrameSelection(**selection))
    except UserError as e:  # VideoLoadError included: no frame in the selection
        raise ServiceError(422, ErrorCode.INVALID, scrub(e, video.path)) from e


def _track_sync(
    segmenter: VideoSegmenter, stored: StoredVideo, source: VideoSource, req: TrackRequest
) -> bytes:
    """Track the request's phrases (blocking: a worker thread); the answer's JSON bytes."""
    # The in-process backend's sanitiser: the service tracks what SAM 3 in-process would.
    cleaned = [clean_phrase(p) for p in req.phrases]
    try:
        embedding = segmenter.open(source)
        found = embedding.track(cleaned, req.score_threshold)
        if len(found) != len(cleaned):
            raise SegmenterError(f"the tracker answered {len(found)} of {len(cleaned)} phrases")
        results = [
            TrackResult(
                phrase=text,
                used_phrase=phrase_as_read(embedding, text),
                tracks=TracksJson.model_validate(tracks.to_json()),
            )
            for text, tracks in zip(cleaned, found, strict=True)
        ]
    except VideoLoadError as e:
        raise ServiceError(400, ErrorCode.BAD_VIDEO, scrub(e, stored.path)) from e
    except UserError as e:
        raise ServiceError(400, ErrorCode.INVALID, scrub(e, stored.path)) from e
    except SegmenterError as e:
        logger.error("video segmenter failed: %s", e)
        raise ServiceError(503, ErrorCode.SEGMENTER, one_line(e)) from e
    answer = TrackResponse(
        video_id=stored.video_id,
        frames_used=list(source.indices),
        size=source.size,
        results=results,
    )
    return answer.model_dump_json().encode()
