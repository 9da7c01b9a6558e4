"""Resumable sessions: the state of a session committed after every round, and a call journal.

A run directory holds, next to ``result.json`` and ``trace.jsonl``:

* ``session.json``: the last committed round's state (:class:`SessionState`): the steps with
  their observations (images by file name under ``images/``), the phrases tried, the current
  masks as COCO RLE with boxes and scores, the budgets used, token usage, timings, how the
  session ended (once it has), the size of ``trace.jsonl`` at that moment, and what the
  session was started with (:class:`Fingerprint`, prompt hashes). Replaced atomically.
* ``calls.jsonl``: every MLLM answer and SAM 3 result of the round in progress, appended
  (and synced) the moment it arrives. A session killed mid-round replays them on resume
  instead of asking again, so no finished call is repeated and the replies are the same.

``system_prompt.txt`` and ``checker_prompt.txt`` are the prompts the session started with;
a resumed session reads them back, so it keeps its prompt set after the package's changes.

The agent loop uses one :class:`Checkpoint` per session: :meth:`Checkpoint.restore` at the
start, :meth:`Checkpoint.commit` after each round. Without an output directory both do
nothing and the backends are used unwrapped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from sam3_agent import __version__
from sam3_agent.backends.base import ChatModel, ImageEmbedding, Segmenter
from sam3_agent.detections import Detections
from sam3_agent.errors import ResumeError
from sam3_agent.images import EncodedImage, RGBImage, image_digest
from sam3_agent.messages import (
    ChatMessage,
    ChatResponse,
    ImagePart,
    NativeToolCall,
    TextPart,
    TokenUsage,
    ToolSpec,
)
from sam3_agent.outputs import Trace, atomic_write_json
from sam3_agent.parsing import ToolCall
from sam3_agent.result import Usage
from sam3_agent.steps import ActionStep, Observation
from sam3_agent.tools import Final

if TYPE_CHECKING:
    from sam3_agent.config import AgentConfig
    from sam3_agent.session import Session

logger = logging.getLogger(__name__)

STATE_FILE = "session.json"
JOURNAL_FILE = "calls.jsonl"
SYSTEM_PROMPT_FILE = "system_prompt.txt"
CHECKER_PROMPT_FILE = "checker_prompt.txt"
FORMAT = 1


# -- what a session started with --------------------------------------------------------


@dataclass(frozen=True)
class Fingerprint:
    """What must be equal for a session to be resumed: the image, the query, the settings.

    ``settings`` holds every :class:`~sam3_agent.config.AgentConfig` field and the MLLM's
    name; ``image_sha256`` is :func:`~sam3_agent.images.image_digest` of the decoded pixels.
    """

    query: str
    image_sha256: str
    image_size: tuple[int, int]
    settings: dict[str, Any]

    @classmethod
    def of(cls, *, query: str, image: RGBImage, config: AgentConfig, model: str) -> Fingerprint:
        h, w = image.shape[:2]
        settings = {**config.to_dict(), "model": model}
        return cls(query, image_digest(image), (int(h), int(w)), settings)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "image_sha256": self.image_sha256,
            "image_size": list(self.image_size),
            "settings": self.settings,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Fingerprint:
        h, w = doc["image_size"]
        return cls(str(doc["query"]), str(doc["image_sha256"]), (int(h), int(w)), doc["settings"])

    def differences(self, now: Fingerprint, *, compare_model: bool = True) -> list[str]:
        """What differs between the session as started (``self``) and the request ``now``.

        Each entry names the difference; empty when the session may be resumed.
        """
        found = []
        if self.image_sha256 != now.image_sha256 or self.image_size != now.image_size:
            found.append(
                f"the image differs ({_size(self.image_size)} sha256 {self.image_sha256[:12]} "
                f"at start, {_size(now.image_size)} sha256 {now.image_sha256[:12]} now)"
            )
        if self.query != now.query:
            found.append(f"the query differs ({self.query!r} at start, {now.query!r} now)")
        # A settings field added by a later version (absent from an old session) is compared
        # only when both sides have it.
        for name in sorted(set(self.settings) & set(now.settings)):
            if name == "model" and not compare_model:
                continue
            before, after = self.settings[name], now.settings[name]
            if _jsonable(before) != _jsonable(after):
                found.append(f"setting {name} differs ({before!r} at start, {after!r} now)")
        return found


def _size(hw: tuple[int, int]) -> str:
    return f"{hw[1]}x{hw[0]}"


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for comparisons."""
    return json.loads(json.dumps(value))


# -- the committed state ----------------------------------------------------------------


@dataclass
class Ending:
    """How a session ended: a :class:`~sam3_agent.tools.Final` answer, or a failure text."""

    final: Final | None
    failure: str | None


@dataclass
class SessionState:
    """Everything a session needs to continue after its last committed round.

    Attributes:
        round: main-conversation calls made (the last committed round's number).
        corrections: corrective messages sent so far.
        steps: the history the loop builds its context from (a final step is not in it).
        phrases: phrases executed, in order.
        current: the masks that can be selected now, or None.
        checks_used: mask-check calls made.
        usage: tokens so far, main conversation and checks apart.
        timings: seconds per phase so far.
        ending: set once the session has ended.
    """

    round: int = 0
    corrections: int = 0
    steps: list[ActionStep] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    current: Detections | None = None
    checks_used: int = 0
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    ending: Ending | None = None

    def to_json(
        self,
        save_image: Callable[[EncodedImage], str],
        encode_masks: Callable[[Detections | None], dict[str, Any] | None] | None = None,
    ) -> dict[str, Any]:
        """JSON-ready form; images are written by ``save_image``, which returns their file.

        ``encode_masks`` turns the current masks into JSON (a caching encoder may be given).
        """
        encode_masks = encode_masks or _detections_to_json
        return {
            "round": self.round,
            "corrections": self.corrections,
            "steps": [_step_to_json(s, save_image) for s in self.steps],
            "phrases": list(self.phrases),
            "current": encode_masks(self.current),
            "checks_used": self.checks_used,
            "usage": _usage_to_json(self.usage),
            "timings": dict(self.timings),
            "ending": _ending_to_json(self.ending),
        }

    @classmethod
    def from_json(
        cls,
        doc: dict[str, Any],
        *,
        load_image: Callable[[dict[str, Any]], EncodedImage],
        image_size: tuple[int, int],
    ) -> SessionState:
        """Inverse of :meth:`to_json`. ``image_size`` is ``(height, width)`` of the masks."""
        current = _detections_from_json(doc["current"], image_size)
        return cls(
            round=int(doc["round"]),
            corrections=int(doc["corrections"]),
            steps=[_step_from_json(s, load_image) for s in doc["steps"]],
            phrases=[str(p) for p in doc["phrases"]],
            current=current,
            checks_used=int(doc["checks_used"]),
            usage=_usage_from_json(doc["usage"]),
            timings={str(k): float(v) for k, v in doc["timings"].items()},
            ending=_ending_from_json(doc["ending"], image_size),
        )


def _step_to_json(step: ActionStep, save_image: Callable[[EncodedImage], str]) -> dict[str, Any]:
    obs = step.observation
    image = None
    if obs.image is not None:
        image = {
            "file": save_image(obs.image),
            "name": obs.image.name,
            "mime": obs.image.mime,
            "width": obs.image.width,
            "height": obs.image.height,
            "sha256": obs.image.sha256,
        }
    return {
        "round": step.round,
        "reply": step.reply,
        "kind": step.kind,
        "call": None
        if step.call is None
        else {"name": step.call.name, "parameters": step.call.parameters},
        "phrase": step.phrase,
        "observation": {
            "text": obs.text,
            "image": image,
            "image_dropped_text": obs.image_dropped_text,
        },
    }


def _step_from_json(
    doc: dict[str, Any], load_image: Callable[[dict[str, Any]], EncodedImage]
) -> ActionStep:
    obs = doc["observation"]
    call = doc["call"]
    return ActionStep(
        round=int(doc["round"]),
        reply=str(doc["reply"]),
        kind=doc["kind"],
        observation=Observation(
            text=str(obs["text"]),
            image=None if obs["image"] is None else load_image(obs["image"]),
            image_dropped_text=str(obs["image_dropped_text"]),
        ),
        call=None if call is None else ToolCall(str(call["name"]), dict(call["parameters"])),
        phrase=doc["phrase"],
    )


def coco_rle(mask: npt.NDArray[np.bool_]) -> dict[str, Any]:
    """COCO RLE of one ``(H, W)`` bool mask, identical to :func:`~sam3_agent.detections.encode_rle`.

    Only the mask's bounding box is scanned: the runs outside it are zeros, so their lengths
    follow from the box. pycocotools would first copy the whole mask to column-major order,
    about 0.1 s per mask at 3000x2000 px, paid for every mask at every commit.
    """
    from pycocotools import mask as mask_utils

    h, w = mask.shape
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        counts = np.asarray([h * w])
    else:
        y0, y1 = int(rows[0]), int(rows[-1]) + 1
        cols = np.flatnonzero(mask[y0:y1].any(axis=0))
        x0, x1 = int(cols[0]), int(cols[-1]) + 1
        padded = np.zeros((y1 - y0 + 2, x1 - x0), dtype=np.int8)
        padded[1:-1] = mask[y0:y1, x0:x1]
        # Value changes down each column of the box (zero rows pad it above and below),
        # column by column: that is the column-major order RLE runs are counted in.
        c, r = np.nonzero((padded[1:] != padded[:-1]).T)
        flips = (x0 + c).astype(np.int64) * h + y0 + r
        # A box spanning the full height makes a column's last change and the next column's
        # first meet at one position: the two cancel out.
        flips, seen = np.unique(flips, return_counts=True)
        flips = flips[(seen == 1) & (flips < h * w)]  # no empty run after the last pixel
        counts = np.diff(np.concatenate([[0], flips, [h * w]]))
    compressed = mask_utils.frPyObjects({"size": [h, w], "counts": counts.tolist()}, h, w)
    return {"size": [h, w], "counts": compressed["counts"].decode()}


def _detections_to_json(detections: Detections | None) -> dict[str, Any] | None:
    if detections is None:
        return None
    return {
        "rle": [coco_rle(m) for m in detections.masks],
        "boxes": detections.boxes.tolist(),
        "scores": detections.scores.tolist(),
    }


def _detections_from_json(
    doc: dict[str, Any] | None, image_size: tuple[int, int]
) -> Detections | None:
    if doc is None:
        return None
    return Detections.from_coco_rle(doc["rle"], doc["boxes"], doc["scores"], image_size)


def _ending_to_json(ending: Ending | None) -> dict[str, Any] | None:
    if ending is None:
        return None
    final = ending.final
    return {
        "failure": ending.failure,
        "final": None
        if final is None
        else {"status": final.status, "detections": _detections_to_json(final.detections)},
    }


def _ending_from_json(doc: dict[str, Any] | None, image_size: tuple[int, int]) -> Ending | None:
    if doc is None:
        return None
    final = doc["final"]
    if final is None:
        return Ending(None, doc["failure"])
    detections = _detections_from_json(final["detections"], image_size)
    return Ending(
        Final(final["status"], detections or Detections.empty(*image_size)), doc["failure"]
    )


# Usage is stored field by field, not as its result.json form (which adds totals), so
# counters a later version adds to it are kept too.


def _usage_to_json(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(usage):
        value = getattr(usage, f.name)
        if isinstance(value, TokenUsage):
            value = {
                "prompt_tokens": value.prompt_tokens,
                "completion_tokens": value.completion_tokens,
                "calls": value.calls,
            }
        out[f.name] = value
    return out


def _usage_from_json(doc: dict[str, Any]) -> Usage:
    usage = Usage()
    for f in fields(usage):
        if f.name not in doc:
            continue
        value = doc[f.name]
        if isinstance(getattr(usage, f.name), TokenUsage):
            value = TokenUsage(
                int(value["prompt_tokens"]), int(value["completion_tokens"]), int(value["calls"])
            )
        setattr(usage, f.name, value)
    return usage


# -- the journal of finished calls of the round in progress -----------------------------


def request_key(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None) -> str:
    """A digest of one chat request: roles, texts, image contents (by hash), tool specs.

    Any other field of a message (native tool calls, say) counts by its ``repr``.
    """
    canonical = [
        [
            m.role,
            [
                ["i", p.image.sha256] if isinstance(p, ImagePart) else ["t", p.text]
                for p in m.parts
                if isinstance(p, ImagePart | TextPart)
            ],
            [repr(getattr(m, f.name)) for f in fields(m) if f.name not in ("role", "parts")],
        ]
        for m in messages
    ]
    specs = [[t.name, t.description, t.parameters] for t in tools or ()]
    blob = json.dumps([canonical, specs], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _response_to_json(response: ChatResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "usage": [
            response.usage.prompt_tokens,
            response.usage.completion_tokens,
            response.usage.calls,
        ],
        "reasoning": response.reasoning,
        "finish_reason": response.finish_reason,
        "tool_calls": [
            {f.name: getattr(c, f.name) for f in fields(c)} for c in response.tool_calls
        ],
        "cached": response.cached,
    }


def _response_from_json(doc: dict[str, Any]) -> ChatResponse:
    prompt, completion, calls = doc["usage"]
    return ChatResponse(
        text=doc["text"],
        usage=TokenUsage(int(prompt), int(completion), int(calls)),
        reasoning=doc["reasoning"],
        finish_reason=doc["finish_reason"],
        tool_calls=tuple(NativeToolCall(**c) for c in doc["tool_calls"]),
        cached=bool(doc["cached"]),
    )


JournalKind = Literal["chat", "segment"]


class Journal:
    """``calls.jsonl``: results of the round in progress, each synced to disk on arrival.

    Entries carry the round they belong to. :meth:`take` hands back a recorded result of
    that round once (a result is consumed like the call it replaces); :meth:`reset` starts
    the next round.
    """

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


class JournaledChatModel:
    """A :class:`ChatModel` whose answers are journaled, and replayed on resume."""

    def __init__(self, inner: ChatModel, journal: Journal) -> None:
        self.inner = inner
        self._journal = journal

    @property
    def name(self) -> str:
        return self.inner.name

    def __getattr__(self, attribute: str) -> Any:
        # Anything else a backend offers (close, its processor, ...) is the inner model's.
        return getattr(self.inner, attribute)

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] | None = None
    ) -> ChatResponse:
        key = request_key(messages, tools)
        saved = self._journal.take("chat", key)
        if saved is not None:
            return _response_from_json(saved)
        response = await self.inner.complete(messages, tools=tools)
        self._journal.append("chat", key, _response_to_json(response))
        return response


class JournaledSegmenter:
    """A :class:`Segmenter` whose phrase results are journaled, and replayed on resume.

    The image embedding itself is not journaled: a resumed session computes it again.
    """

    def __init__(self, inner: Segmenter, journal: Journal) -> None:
        self.inner = inner
        self._journal = journal

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)

    def embed(self, image: RGBImage) -> ImageEmbedding:
        return _JournaledEmbedding(self.inner.embed(image), self._journal)


class _JournaledEmbedding:
    def __init__(self, inner: ImageEmbedding, journal: Journal) -> None:
        self.inner = inner
        self._journal = journal

    @property
    def image_size(self) -> tuple[int, int]:
        return self.inner.image_size

    def segment(self, phrases: Sequence[str], score_threshold: float) -> list[Detections]:
        key = hashlib.sha256(json.dumps([list(phrases), score_threshold]).encode()).hexdigest()
        saved = self._journal.take("segment", key)
        if saved is not None:
            return [
                _detections_from_json(d, self.image_size) or Detections.empty(*self.image_size)
                for d in saved
            ]
        results = self.inner.segment(phrases, score_threshold)
        self._journal.append("segment", key, [_detections_to_json(d) for d in results])
        return results


# -- the checkpoint of one session ------------------------------------------------------


class ContinuedTrace(Trace):
    """A trace that keeps the records of the committed rounds instead of starting empty.

    Whatever a killed process wrote after its last commit (records of the unfinished round,
    a torn line) is cut off; the resumed round writes its records again.
    """

    def __init__(self, directory: Path, committed_bytes: int) -> None:
        super().__init__(None)  # None: do not create or empty anything
        self.directory = directory
        path = directory / "trace.jsonl"
        size = path.stat().st_size if path.is_file() else 0
        if size < committed_bytes:
            raise ResumeError(
                f"cannot resume {directory}: trace.jsonl has {size} bytes, the last committed "
                f"round had written {committed_bytes}"
            )
        with open(path, "r+b") as f:
            f.truncate(committed_bytes)


class Checkpoint:
    """The committed state of one session in its run directory (see the module docstring).

    Build it with :meth:`start` (a new session), :meth:`resume` (continue one) or
    :meth:`disabled` (no output directory). The session's prompts are :attr:`system_prompt`
    and :attr:`checker_prompt`; its trace is :attr:`trace`.
    """

    def __init__(
        self,
        directory: Path | None,
        *,
        trace: Trace,
        system_prompt: str,
        checker_prompt: str,
        fingerprint: Fingerprint | None,
        saved: dict[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.trace = trace
        self.system_prompt = system_prompt
        self.checker_prompt = checker_prompt
        self.fingerprint = fingerprint
        self._saved = saved
        committed = int(saved["state"]["round"]) if saved else 0
        self._journal: Journal | None = None
        # The current masks often stay the same for several rounds: encode them once.
        self._encoded: tuple[Detections, dict[str, Any] | None] | None = None
        if directory is not None:
            replay = read_journal(directory / JOURNAL_FILE) if saved else []
            self._journal = Journal(directory / JOURNAL_FILE, committed + 1, replay)
            if not saved:
                self._journal.reset(committed + 1)

    # -- construction ----------------------------------------------------------------

    @classmethod
    def disabled(cls, *, system_prompt: str, checker_prompt: str) -> Checkpoint:
        return cls(
            None,
            trace=Trace(None),
            system_prompt=system_prompt,
            checker_prompt=checker_prompt,
            fingerprint=None,
        )

    @classmethod
    def start(
        cls,
        directory: Path,
        fingerprint: Fingerprint,
        *,
        system_prompt: str,
        checker_prompt: str,
    ) -> Checkpoint:
        """A new session in ``directory``: an empty trace, the prompts saved, round 0 committed."""
        # An earlier session's state must not describe this directory's new trace.
        (directory / STATE_FILE).unlink(missing_ok=True)
        trace = Trace(directory)
        trace.save_text(SYSTEM_PROMPT_FILE, system_prompt)
        trace.save_text(CHECKER_PROMPT_FILE, checker_prompt)
        checkpoint = cls(
            directory,
            trace=trace,
            system_prompt=system_prompt,
            checker_prompt=checker_prompt,
            fingerprint=fingerprint,
        )
        checkpoint._write(SessionState())
        return checkpoint

    @classmethod
    def resume(cls, directory: Path, fingerprint: Fingerprint) -> Checkpoint:
        """Continue the session saved in ``directory``.

        Raises:
            ResumeError: nothing to resume there, unreadable files, or ``fingerprint`` (the
                image, query and settings given now) differs from the session's.
        """
        saved = load_saved(directory)
        check_fingerprint(directory, saved, fingerprint)
        try:
            hashes = {name: str(saved["prompts"][name]) for name in ("system", "checker")}
            trace_bytes = int(saved["trace_bytes"])
            int(saved["state"]["round"])
        except (KeyError, TypeError, ValueError) as e:
            raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is damaged: {e!r}") from e
        system_prompt = _read_prompt(directory, SYSTEM_PROMPT_FILE, hashes["system"])
        checker_prompt = _read_prompt(directory, CHECKER_PROMPT_FILE, hashes["checker"])
        trace = ContinuedTrace(directory, trace_bytes)
        checkpoint = cls(
            directory,
            trace=trace,
            system_prompt=system_prompt,
            checker_prompt=checker_prompt,
            fingerprint=fingerprint,
            saved=saved,
        )
        journal = checkpoint._journal
        logger.info(
            "resuming %s after round %s (%d journaled results to replay)",
            directory,
            saved["state"]["round"],
            journal.replayable if journal else 0,
        )
        return checkpoint

    # -- the backends, journaled -----------------------------------------------------

    def chat_model(self, inner: ChatModel) -> ChatModel:
        return inner if self._journal is None else JournaledChatModel(inner, self._journal)

    def segmenter(self, inner: Segmenter) -> Segmenter:
        return inner if self._journal is None else JournaledSegmenter(inner, self._journal)

    # -- the loop's two calls --------------------------------------------------------

    def restore(self, session: Session) -> SessionState:
        """Put the committed state into ``session``; the state (empty for a new session)."""
        if self._saved is None or self.directory is None:
            return SessionState()
        h, w = session.image.shape[:2]
        try:
            state = SessionState.from_json(
                self._saved["state"], load_image=self._load_image, image_size=(h, w)
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ResumeError(
                f"cannot resume {self.directory}: {STATE_FILE} is damaged: {e!r}"
            ) from e
        session.round = state.round
        session.phrases = list(state.phrases)
        session.current = state.current
        session.checks_used = state.checks_used
        session.usage = state.usage
        for phase, seconds in state.timings.items():
            session.timings[phase] += seconds
        return state

    def commit(
        self,
        session: Session,
        steps: Sequence[ActionStep],
        corrections: int,
        ending: Ending | None = None,
    ) -> None:
        """Commit the state after the round ``session.round`` (atomic; then a new journal)."""
        if self.directory is None:
            return
        state = SessionState(
            round=session.round,
            corrections=corrections,
            steps=list(steps),
            phrases=list(session.phrases),
            current=session.current,
            checks_used=session.checks_used,
            usage=session.usage,
            timings=dict(session.timings),
            ending=ending,
        )
        self._write(state)
        if self._journal is not None:
            self._journal.reset(session.round + 1)

    # -- files -----------------------------------------------------------------------

    def _write(self, state: SessionState) -> None:
        if self.directory is None or self.fingerprint is None:
            return
        trace_path = self.directory / "trace.jsonl"
        # The trace is appended without syncing; sync it before the state that points past it.
        with open(trace_path, "rb+") as f:
            os.fsync(f.fileno())
            trace_bytes = f.seek(0, os.SEEK_END)
        atomic_write_json(
            self.directory / STATE_FILE,
            {
                "format": FORMAT,
                "version": __version__,
                "fingerprint": self.fingerprint.to_json(),
                "prompts": {
                    "system": _sha256(self.system_prompt),
                    "checker": _sha256(self.checker_prompt),
                },
                "trace_bytes": trace_bytes,
                "state": state.to_json(self.trace.save_image, self._encode_masks),
            },
        )

    def _encode_masks(self, detections: Detections | None) -> dict[str, Any] | None:
        if detections is None:
            return None
        if self._encoded is None or self._encoded[0] is not detections:
            self._encoded = (detections, _detections_to_json(detections))
        return self._encoded[1]

    def _load_image(self, doc: dict[str, Any]) -> EncodedImage:
        directory = self.directory or Path(".")  # only called while resuming a directory
        path = _inside(directory, str(doc["file"]))
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ResumeError(f"cannot resume {directory}: {doc['file']}: {e}") from e
        image = EncodedImage(
            name=str(doc["name"]),
            data=data,
            mime=doc["mime"],
            width=int(doc["width"]),
            height=int(doc["height"]),
        )
        if image.sha256 != doc["sha256"]:
            raise ResumeError(
                f"cannot resume {directory}: {doc['file']} changed since it was saved"
            )
        return image


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _inside(directory: Path, relative: str) -> Path:
    try:
        path = (directory / relative).resolve()
    except (OSError, ValueError) as e:
        raise ResumeError(f"cannot resume {directory}: bad file name {relative!r}") from e
    if not path.is_relative_to(directory.resolve()):
        raise ResumeError(f"cannot resume {directory}: {relative!r} is outside the run directory")
    return path


def _read_prompt(directory: Path, name: str, sha256: str) -> str:
    try:
        text = (directory / name).read_bytes().decode()
    except (OSError, UnicodeDecodeError) as e:
        raise ResumeError(f"cannot resume {directory}: cannot read {name}: {e}") from e
    if _sha256(text) != sha256:
        raise ResumeError(f"cannot resume {directory}: {name} changed since the session started")
    return text


def load_saved(directory: Path) -> dict[str, Any]:
    """``session.json`` of ``directory``, read and checked for its format.

    Raises:
        ResumeError: no such file (nothing to resume), unreadable, or another format.
    """
    path = directory / STATE_FILE
    if not path.is_file():
        raise ResumeError(f"nothing to resume in {directory}: no {STATE_FILE}")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is unreadable: {e}") from e
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        found = saved.get("format") if isinstance(saved, dict) else None
        raise ResumeError(
            f"cannot resume {directory}: {STATE_FILE} has format {found!r}, expected {FORMAT}"
        )
    return saved


def check_fingerprint(
    directory: Path, saved: dict[str, Any], now: Fingerprint, *, compare_model: bool = True
) -> None:
    """Raise :class:`ResumeError` naming every difference between the session and ``now``."""
    try:
        before = Fingerprint.from_json(saved["fingerprint"])
    except (KeyError, TypeError, ValueError) as e:
        raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is damaged: {e!r}") from e
    differences = before.differences(now, compare_model=compare_model)
    if differences:
        raise ResumeError(f"cannot resume {directory}: " + "; ".join(differences))


def check_resumable(directory: Path, *, query: str, image: RGBImage, config: AgentConfig) -> int:
    """Check, before any model loads, that ``directory`` holds a session this request continues.

    The MLLM's name is compared later, when the model is built. Returns the last committed
    round.

    Raises:
        ResumeError: nothing to resume, damaged files, or a different image, query or settings.
    """
    saved = load_saved(directory)
    now = Fingerprint.of(query=query, image=image, config=config, model="")
    check_fingerprint(directory, saved, now, compare_model=False)
    try:
        return int(saved["state"]["round"])
    except (KeyError, TypeError, ValueError) as e:
        raise ResumeError(f"cannot resume {directory}: {STATE_FILE} is damaged: {e!r}") from e
