"""What a committed session holds (:class:`Fingerprint`: what it started with;
:class:`SessionState`: what it needs to continue) and its JSON form: masks as COCO RLE,
images by file name (the caller writes and reads them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any

from sam3_agent.agent.parsing import ToolCall
from sam3_agent.agent.result import Usage
from sam3_agent.agent.steps import ActionStep, Answer, Final, Observation
from sam3_agent.backends.identity import CHAT
from sam3_agent.values.detections import Detections
from sam3_agent.values.images import EncodedImage, RGBImage, image_digest
from sam3_agent.values.messages import NativeToolCall, TokenUsage
from sam3_agent.values.text import changed
from sam3_agent.values.tracks import Tracks

if TYPE_CHECKING:
    from sam3_agent.values.config import AgentConfig

Backends = Mapping[str, Mapping[str, Any] | None]
"""What each backend said of itself, by part (``mllm``, ``sam3``); ``None``: not described."""


@dataclass(frozen=True)
class Fingerprint:
    """What must be equal for a session to be resumed; ``backends`` is None in a session
    saved before backends were recorded."""

    query: str
    image_sha256: str
    image_size: tuple[int, int]
    settings: dict[str, Any]
    backends: dict[str, dict[str, Any]] | None = None

    @classmethod
    def of(
        cls,
        *,
        query: str,
        image: RGBImage,
        config: AgentConfig,
        model: str | None,
        backends: Backends | None = None,
    ) -> Fingerprint:
        """An image session's (``model`` and ``backends`` as for :meth:`of_input`)."""
        size = (int(image.shape[0]), int(image.shape[1]))
        return cls.of_input(query, image_digest(image), size, config.to_dict(), model, backends)

    @classmethod
    def of_input(
        cls,
        query: str,
        digest: str,
        size: tuple[int, int],
        settings: dict[str, Any],
        model: str | None,
        backends: Backends | None = None,
    ) -> Fingerprint:
        """A session on an input of content ``digest`` and mask ``size``; a ``model`` or
        backend part that is None (not known yet) is not compared."""
        if model is not None:
            settings = {**settings, "model": model}
        described = {part: dict(d) for part, d in (backends or {}).items() if d is not None}
        return cls(query, digest, size, settings, described)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["image_size"] = list(self.image_size)
        if self.backends is None:
            del doc["backends"]
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Fingerprint:
        h, w = doc["image_size"]
        backends = doc.get("backends")
        if backends is not None:
            backends = {str(part): dict(d) for part, d in backends.items()}
        digest, settings = str(doc["image_sha256"]), dict(doc["settings"])
        return cls(str(doc["query"]), digest, (int(h), int(w)), settings, backends)

    def differences(self, now: Fingerprint) -> list[str]:
        """Each difference between the session as started and the request ``now`` (empty:
        it may be resumed); what one side does not hold is not compared."""
        found = []
        if self.image_sha256 != now.image_sha256 or self.image_size != now.image_size:
            found.append(
                f"the image differs ({_size(self.image_size)} sha256 {self.image_sha256[:12]} "
                f"at start, {_size(now.image_size)} sha256 {now.image_sha256[:12]} now)"
            )
        if self.query != now.query:
            found.append(f"the query differs ({self.query!r} at start, {now.query!r} now)")
        named = _names_model(self.backends) and _names_model(now.backends)
        for name in sorted(set(self.settings) & set(now.settings)):
            if name == "model" and named:
                continue  # the MLLM's description names it, with its flag
            before, after = self.settings[name], now.settings[name]
            if _jsonable(before) != _jsonable(after):
                found.append(f"setting {name} differs ({before!r} at start, {after!r} now)")
        before_parts, now_parts = self.backends or {}, now.backends or {}
        for part in sorted(set(before_parts) & set(now_parts)):
            before_part, now_part = before_parts[part], now_parts[part]
            for option in before_part:
                if option not in now_part:
                    continue
                was, is_ = before_part[option], now_part[option]
                line = changed(option, was, is_)
                if _jsonable(was) != _jsonable(is_) and line not in found:
                    found.append(line)  # once: --dtype is both models' option
        return found


def _names_model(backends: dict[str, dict[str, Any]] | None) -> bool:
    chat = (backends or {}).get(CHAT, {})
    return "--llm" in chat or "--llm-model" in chat


def _size(hw: tuple[int, int]) -> str:
    return f"{hw[1]}x{hw[0]}"


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for comparisons."""
    return json.loads(json.dumps(value))


@dataclass
class Ending:
    """How a session ended: a :class:`~sam3_agent.agent.steps.Final` answer, or a failure text."""

    final: Final[Any] | None
    failure: str | None


@dataclass
class SessionState:
    """What a session needs to continue after its last committed round; ``steps`` hold no
    final step, ``timings`` seconds per phase with the ``total``, ``context`` the policy's."""

    round: int = 0
    corrections: int = 0
    steps: list[ActionStep] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    current: Answer | None = None
    kept: Answer | None = None
    kept_from: list[str] = field(default_factory=list)
    checks_used: int = 0
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    ending: Ending | None = None
    context: dict[str, Any] | None = None

    def to_json(
        self,
        save_image: Callable[[EncodedImage], str],
        encode_masks: Callable[[Answer | None], dict[str, Any] | None] | None = None,
    ) -> dict[str, Any]:
        """JSON-ready form; ``save_image`` writes an image and returns its file;
        ``encode_masks`` may be a caching :func:`detections_to_json`."""
        encode_masks = encode_masks or detections_to_json
        # Only a session with a kept set (the extended tools) writes one: the paper tools'
        # checkpoints stay as they were.
        kept = {}
        if self.kept is not None:
            kept = {"kept": encode_masks(self.kept), "kept_from": list(self.kept_from)}
        return {
            "round": self.round,
            "corrections": self.corrections,
            "steps": [_step_to_json(s, save_image) for s in self.steps],
            "phrases": list(self.phrases),
            "current": encode_masks(self.current),
            **kept,
            "checks_used": self.checks_used,
            "usage": asdict(self.usage),
            "timings": dict(self.timings),
            "ending": _ending_to_json(self.ending),
            "context": self.context,
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
        current = detections_from_json(doc["current"], image_size)
        return cls(
            round=int(doc["round"]),
            corrections=int(doc["corrections"]),
            steps=[_step_from_json(s, load_image) for s in doc["steps"]],
            phrases=[str(p) for p in doc["phrases"]],
            current=current,
            kept=detections_from_json(doc.get("kept"), image_size),
            kept_from=[str(p) for p in doc.get("kept_from", ())],
            checks_used=int(doc["checks_used"]),
            usage=_usage_from_json(doc["usage"]),
            timings={str(k): float(v) for k, v in doc["timings"].items()},
            ending=_ending_from_json(doc["ending"], image_size),
            # Absent from sessions committed before policies kept their state.
            context=doc.get("context"),
        )


def _step_to_json(step: ActionStep, save_image: Callable[[EncodedImage], str]) -> dict[str, Any]:
    """The step's fields in file order (``native_call`` under ``extra``), dataclasses as their
    fields, the observation's image by the file it was saved to."""
    image = step.observation.image
    saved_image = None
    if image is not None:
        saved_image = {"file": save_image(image)} | {k: getattr(image, k) for k in _IMAGE_KEYS}
    return {
        "extra": {"native_call": _fields(step.native_call)},
        "round": step.round,
        "reply": step.reply,
        "kind": step.kind,
        "call": _fields(step.call),
        "phrase": step.phrase,
        "observation": _fields(step.observation) | {"image": saved_image},
    }


def _step_from_json(
    doc: dict[str, Any], load_image: Callable[[dict[str, Any]], EncodedImage]
) -> ActionStep:
    obs = doc["observation"]
    call = doc["call"]
    native = doc.get("extra", {}).get("native_call")
    return ActionStep(
        round=int(doc["round"]),
        reply=str(doc["reply"]),
        kind=doc["kind"],
        observation=Observation(
            text=str(obs["text"]),
            image=None if obs["image"] is None else load_image(obs["image"]),
            image_dropped_text=str(obs["image_dropped_text"]),
            # Absent from checkpoints written before the context policies' stand-in.
            image_gone_text=str(obs.get("image_gone_text", "")),
        ),
        call=None if call is None else ToolCall(str(call["name"]), dict(call["parameters"])),
        phrase=doc["phrase"],
        native_call=None if native is None else NativeToolCall(**native),
    )


_IMAGE_KEYS = ("name", "mime", "width", "height", "sha256")


def _fields(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in fields(value)}
    return value


def detections_to_json(detections: Answer | None) -> dict[str, Any] | None:
    """Masks as JSON (:meth:`~sam3_agent.values.detections.Candidates.to_state`)."""
    return None if detections is None else detections.to_state()


def detections_from_json(doc: dict[str, Any] | None, image_size: tuple[int, int]) -> Answer | None:
    """Inverse of :func:`detections_to_json`: tracks are stored under ``"tracks"``."""
    if doc is None:
        return None
    if "tracks" in doc:
        return Tracks.from_json(doc["tracks"])
    return Detections.from_coco_rle(doc["rle"], doc["boxes"], doc["scores"], image_size)


def _ending_to_json(ending: Ending | None) -> dict[str, Any] | None:
    if ending is None:
        return None
    final = ending.final
    return {
        "failure": ending.failure,
        "final": None
        if final is None
        else {"status": final.status, "detections": detections_to_json(final.detections)},
    }


def _ending_from_json(doc: dict[str, Any] | None, image_size: tuple[int, int]) -> Ending | None:
    if doc is None:
        return None
    final = doc["final"]
    if final is None:
        return Ending(None, doc["failure"])
    detections = detections_from_json(final["detections"], image_size)
    return Ending(
        Final(final["status"], Detections.empty(*image_size) if detections is None else detections),
        doc["failure"],
    )


# Usage is stored field by field, not as its result.json form (which adds totals), so
# counters a later version adds to it are kept too.


def _usage_from_json(doc: dict[str, Any]) -> Usage:
    usage = Usage()
    for f in fields(usage):
        if f.name in doc:
            value = doc[f.name]
            if isinstance(getattr(usage, f.name), TokenUsage):
                names = ("prompt_tokens", "completion_tokens", "calls")
                value = TokenUsage(*(int(value[n]) for n in names))
            setattr(usage, f.name, value)
    return usage
