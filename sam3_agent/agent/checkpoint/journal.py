"""``calls.jsonl``: the MLLM answers and SAM 3 results of the round in progress, each synced
on arrival, so that the wrapped backends give a resumed session a recorded result back
(found by the request's key, as the response cache's, or by a digest of the phrases)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from sam3_agent.agent import rundir
from sam3_agent.agent.checkpoint.state import detections_to_json
from sam3_agent.backends.base import (
    ChatModel,
    EmbeddingWrapper,
    ImageEmbedding,
    Segmenter,
    SegmenterWrapper,
    VideoEmbedding,
    VideoSegmenter,
    phrase_as_read,
)
from sam3_agent.backends.response_cache import ReplayingChatModel
from sam3_agent.media.video import VideoSource
from sam3_agent.values.detections import Detections, Exemplars
from sam3_agent.values.images import RGBImage
from sam3_agent.values.messages import ChatResponse, response_from_json, response_to_json
from sam3_agent.values.tracks import Tracks

JOURNAL_FILE = rundir.JOURNAL
logger = logging.getLogger(__name__)
T = TypeVar("T")
JournalKind = Literal["chat", "segment", "track"]
# What decoding a journal record that is valid JSON of the wrong shape raises.
UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)


class Journal:
    """``calls.jsonl``: results of the round in progress, tagged with their round; :meth:`take`
    hands each back once (consumed like the call it replaces)."""

    def __init__(self, path: Path, round_: int, replay: list[dict[str, Any]]) -> None:
        self.path = path
        self.round = round_
        self._lock = threading.Lock()
        self._replay: dict[tuple[str, str], list[Any]] = {}
        for entry in replay:
            if entry.get("round") == round_:
                self._replay.setdefault((entry["kind"], entry["key"]), []).append(entry["value"])

    @property
    def replayable(self) -> int:
        return sum(len(v) for v in self._replay.values())

    def take(self, kind: JournalKind, key: str) -> Any | None:
        with self._lock:
            values = self._replay.get((kind, key))
            return values.pop(0) if values else None

    def recall(
        self, kind: JournalKind, key: str, decode: Callable[[Any], T], redo: str
    ) -> T | None:
        """The recorded result of ``kind`` for ``key``, decoded; None when there is none or it
        does not decode (the call is made again, ``redo`` says how)."""
        saved = self.take(kind, key)
        if saved is None:
            return None
        try:
            return decode(saved)
        except UNREADABLE as e:
            logger.warning("journaled %s unreadable (%s); %s again", kind, e, redo)
            return None

    def append(self, kind: JournalKind, key: str, value: Any) -> None:
        line = json.dumps({"round": self.round, "kind": kind, "key": key, "value": value})
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def reset(self, round_: int) -> None:
        with self._lock:
            self.round = round_
            self._replay.clear()
            with open(self.path, "w", encoding="utf-8") as f:
                f.flush()
                os.fsync(f.fileno())


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The complete entries of ``calls.jsonl``; a torn last line (a kill mid-write) is skipped."""
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and {"round", "kind", "key", "value"} <= entry.keys():
            entries.append(entry)
    return entries


def _phrases_key(phrases: Sequence[str], score_threshold: float) -> str:
    return hashlib.sha256(json.dumps([list(phrases), score_threshold]).encode()).hexdigest()


class JournaledChatModel(ReplayingChatModel):
    """A :class:`ChatModel` whose answers are journaled, and replayed on resume."""

    def __init__(self, inner: ChatModel, journal: Journal) -> None:
        super().__init__(inner)
        self._journal = journal

    async def recorded(self, key: str) -> ChatResponse | None:
        return self._journal.recall("chat", key, response_from_json, "asking the model")

    async def record(self, key: str, response: ChatResponse) -> None:
        self._journal.append("chat", key, response_to_json(response))


class JournaledSegmenter(SegmenterWrapper[Segmenter]):
    """A :class:`Segmenter` whose phrase results (not the embedding) are journaled."""

    def __init__(self, inner: Segmenter, journal: Journal) -> None:
        super().__init__(inner)
        self._journal = journal

    def embed(self, image: RGBImage) -> ImageEmbedding:
        return _JournaledEmbedding(self.inner.embed(image), self._journal)


class _JournaledEmbedding(EmbeddingWrapper):
    """An embedding whose phrase results (and how the backend read each phrase) are journaled."""

    def __init__(self, inner: ImageEmbedding, journal: Journal) -> None:
        super().__init__(inner)
        self._journal = journal
        self._used: dict[str, str] = {}

    def _replayed(self, saved: dict[str, Any]) -> list[Detections]:
        size = self.image_size
        replayed = [
            Detections.from_coco_rle(d["rle"], d["boxes"], d["scores"], size)
            for d in saved["detections"]
        ]
        self._used.update({str(k): str(v) for k, v in saved["used"].items()})
        return replayed

    def segment(
        self, phrases: Sequence[str], score_threshold: float, exemplars: Exemplars | None = None
    ) -> list[Detections]:
        key = _phrases_key(phrases, score_threshold)
        if exemplars:
            key += "|" + json.dumps(exemplars.to_json(), sort_keys=True)
        replayed = self._journal.recall("segment", key, self._replayed, "segmenting")
        if replayed is not None:
            return replayed
        if exemplars:
            results = self.inner.segment(phrases, score_threshold, exemplars)
        else:
            results = self.inner.segment(phrases, score_threshold)
        used = {p: phrase_as_read(self.inner, p) for p in phrases}
        self._used.update(used)
        value = {"detections": [detections_to_json(d) for d in results], "used": used}
        self._journal.append("segment", key, value)
        return results

    def used_phrase(self, phrase: str) -> str:
        """``phrase`` as the backend read it (cut to its text limit), journaled results too."""
        return self._used.get(phrase) or phrase_as_read(self.inner, phrase)


class JournaledVideoSegmenter(SegmenterWrapper[VideoSegmenter]):
    """A :class:`VideoSegmenter` whose tracks (its costliest calls) are journaled."""

    def __init__(self, inner: VideoSegmenter, journal: Journal) -> None:
        super().__init__(inner)
        self._journal = journal

    def open(self, video: VideoSource) -> VideoEmbedding:
        return _JournaledVideoEmbedding(self.inner, video, self._journal)


class _JournaledVideoEmbedding:
    """Opens the inner video only when a phrase is not in the journal."""

    def __init__(self, segmenter: VideoSegmenter, video: VideoSource, journal: Journal) -> None:
        self._segmenter = segmenter
        self._inner: VideoEmbedding | None = None
        self._journal = journal
        self.video = video

    def track(self, phrases: Sequence[str], score_threshold: float) -> list[Tracks]:
        key = _phrases_key(phrases, score_threshold)
        replayed = self._journal.recall(
            "track", key, lambda saved: [Tracks.from_json(t) for t in saved["tracks"]], "tracking"
        )
        if replayed is not None:
            return replayed
        if self._inner is None:
            self._inner = self._segmenter.open(self.video)
        results = self._inner.track(phrases, score_threshold)
        self._journal.append("track", key, {"tracks": [t.to_json() for t in results]})
        return results
