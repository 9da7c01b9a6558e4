"""Uploaded videos: received to disk under a byte bound, checked (a tar of top-level frame
files unpacked member by member), and kept in an LRU store bounded in bytes."""

from __future__ import annotations

import hashlib
import logging
import shutil
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from sam3_agent.apps.service.intake import ServiceError, body_chunks, too_large
from sam3_agent.apps.service.limits import ServiceLimits
from sam3_agent.backends.lru import Lru
from sam3_agent.backends.schemas import ErrorCode
from sam3_agent.media.video import (
    FRAME_SUFFIXES,
    VideoLoadError,
    VideoSource,
    VideoTooLargeError,
    open_video,
)
from sam3_agent.values.config import FrameSelection
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.images import image_size_as_displayed
from sam3_agent.values.text import one_line

logger = logging.getLogger(__name__)

UPLOAD_NAME = "<upload>"
"""How errors name an uploaded video (never by its path on the server)."""

_WRITE_CHUNK = 1024 * 1024
_MAX_NAME_BYTES = 255
_MAX_OTHER_ENTRIES = 64  # directory entries a tar of frames may hold besides its frames


@dataclass(frozen=True)
class StoredVideo:
    """A checked upload on the server's disk; ``video_id`` is the body's SHA-256."""

    video_id: str
    kind: Literal["file", "frames"]
    path: Path  # the video file, or the folder of frames
    nbytes: int  # on disk
    source: VideoSource  # every frame (no selection)


class VideoStore(Lru[str, StoredVideo]):
    """Uploaded videos on disk, bounded in bytes (LRU), thread-safe; a video in use
    (:meth:`use`) is deleted only once its last user is done."""

    def __init__(self, max_bytes: int, parent: Path | None = None) -> None:
        """A store in a new temporary folder under ``parent`` (default: the system's)."""
        try:
            self.root = Path(tempfile.mkdtemp(prefix="sam3-agent-videos-", dir=parent))
        except OSError as e:
            raise UserError(f"cannot keep uploaded videos in {parent}: {e.strerror}") from e
        super().__init__(sys.maxsize, max_bytes, lambda video: video.nbytes)
        self._users: dict[str, int] = {}
        self._evicted: dict[str, StoredVideo] = {}

    def incoming(self) -> Path:
        return self.root / f"v-{uuid.uuid4().hex}"

    def add(self, video: StoredVideo) -> StoredVideo:
        """Keep ``video`` (its files now the store's), evicting past the bound; the video
        stored under its id (one uploaded before wins, the new files deleted)."""
        with self._lock:
            known, evicted = self.keep(video.video_id, video)
            doomed = [video] if known is not video else []
            for video_id, old in evicted:
                logger.info("video %s evicted from the store", video_id[:12])
                if video_id in self._users:
                    self._evicted[video_id] = old
                else:
                    doomed.append(old)
        for each in doomed:
            delete_path(each.path)
        return known

    @contextmanager
    def use(self, video_id: str) -> Iterator[StoredVideo | None]:
        """The video stored under ``video_id`` (or None), kept on disk until the ``with``
        ends."""
        with self._lock:
            video = self.get(video_id)
            if video is not None:
                self._users[video_id] = self._users.get(video_id, 0) + 1
        try:
            yield video
        finally:
            late = None
            if video is not None:
                with self._lock:
                    self._users[video_id] -= 1
                    if not self._users[video_id]:
                        del self._users[video_id]
                        late = self._evicted.pop(video_id, None)
            if late is not None:
                delete_path(late.path)

    def close(self) -> None:
        with self._lock:
            self.clear()
            self._evicted.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def delete_path(path: Path) -> None:
    """Delete an upload's file or folder; a path already gone is no error."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


async def receive_to_file(request: Request, path: Path, limit: int) -> str:
    """Write the request body to ``path`` as it arrives; its SHA-256 (hex). 413 past
    ``limit`` bytes, 400 when empty; on any failure the partial file is deleted."""
    digest = hashlib.sha256()
    pending = bytearray()
    size = 0
    try:
        with open(path, "xb") as file:

            def flush() -> None:
                digest.update(pending)
                file.write(pending)
                pending.clear()

            async for chunk in body_chunks(request, limit, "video upload"):
                size += len(chunk)
                pending += chunk
                if len(pending) >= _WRITE_CHUNK:
                    await run_in_threadpool(flush)
            await run_in_threadpool(flush)
        if size == 0:
            raise ServiceError(
                400, ErrorCode.BAD_VIDEO, "the body is empty; send a video file or a tar of frames"
            )
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return digest.hexdigest()


def check_video(video_id: str, path: Path, tar: bool, bounds: ServiceLimits) -> StoredVideo:
    """A received upload checked within ``bounds`` (blocking), a tar unpacked into a folder
    beside it; on failure its files are deleted (400 unreadable, 413 over a limit)."""
    max_frames, max_pixels = bounds.max_video_frames, bounds.max_pixels
    target = path.with_name(path.name + ".frames") if tar else path
    try:
        if tar:
            _unpack_frames(path, target, max_frames, max_pixels)
            path.unlink()
        source = open_video(target, FrameSelection(), max_pixels=max_pixels)
        if source.source_frames > max_frames:
            raise too_large(
                f"the video has {source.source_frames} frames; this server takes at most "
                f"{max_frames}"
            )
    except BaseException as e:
        delete_path(path)
        delete_path(target)
        if isinstance(e, VideoTooLargeError):
            raise too_large(scrub(e, target)) from e
        if isinstance(e, (VideoLoadError, UserError)):
            raise ServiceError(400, ErrorCode.BAD_VIDEO, scrub(e, target)) from e
        raise
    nbytes = sum(f.stat().st_size for f in target.iterdir()) if tar else target.stat().st_size
    return StoredVideo(video_id, "frames" if tar else "file", target, nbytes, source)


def scrub(error: BaseException, path: Path) -> str:
    """``error``'s message in one line, naming the upload instead of its path here."""
    return one_line(str(error).replace(str(path), UPLOAD_NAME))


def _unpack_frames(tar_path: Path, folder: Path, max_frames: int, max_pixels: int) -> None:
    """Unpack an uncompressed tar of top-level frame files into ``folder`` (directory
    entries skipped); anything else is refused."""
    folder.mkdir()
    names: set[str] = set()
    try:
        with tarfile.open(tar_path, mode="r:") as archive:
            for entries, member in enumerate(archive, start=1):
                # The archive keeps every entry it read: directory entries count too.
                if entries > max_frames + _MAX_OTHER_ENTRIES:
                    raise too_large(f"the tar holds more than {max_frames} frames")
                if member.isdir():
                    continue
                name = _frame_name(member)
                if name in names:
                    raise VideoLoadError(f"the tar holds two frames named {name!a}")
                names.add(name)
                if len(names) > max_frames:
                    raise too_large(
                        f"the tar holds more than {max_frames} frames, this server's limit"
                    )
                source = archive.extractfile(member)
                if source is None:  # pragma: no cover - a regular file always has data
                    raise VideoLoadError(f"the tar member {name!a} has no data")
                file = folder / name
                with source, open(file, "xb") as out:
                    shutil.copyfileobj(source, out, _WRITE_CHUNK)
                try:
                    height, width = image_size_as_displayed(file)
                except ImageLoadError as e:
                    raise VideoLoadError(f"the frame {name!a} is not a readable image") from e
                if height * width > max_pixels:
                    raise VideoTooLargeError(
                        f"the frame {name!a} has {width}x{height} pixels, over the limit of "
                        f"{max_pixels}"
                    )
    except (tarfile.TarError, EOFError) as e:
        raise VideoLoadError(f"the body is not an uncompressed tar: {one_line(e)}") from e
    if not names:
        raise VideoLoadError(
            f"the tar holds no frame images ({', '.join(FRAME_SUFFIXES)} at its top level)"
        )


def _frame_name(member: tarfile.TarInfo) -> str:
    """The name a tar member is unpacked under: only a top-level frame image file."""
    shown = ascii(member.name)
    if not member.isfile() or member.issparse():
        raise VideoLoadError(f"the tar member {shown} is not a regular file")
    parts = [p for p in PurePosixPath(member.name).parts if p != "."]
    if len(parts) != 1 or parts[0] in ("..", "/"):
        raise VideoLoadError(f"the tar member {shown} is not a file at the tar's top level")
    name = parts[0]
    if len(name.encode("utf-8", "surrogateescape")) > _MAX_NAME_BYTES:
        raise VideoLoadError(f"the tar member {shown} has too long a name")
    if PurePosixPath(name).suffix.lower() not in FRAME_SUFFIXES:
        raise VideoLoadError(
            f"the tar member {shown} is not a frame image ({', '.join(FRAME_SUFFIXES)})"
        )
    return name
