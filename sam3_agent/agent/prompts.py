"""Prompt sets: the template files the agent renders, with a strict Jinja environment; the
canonical set is ``prompts/`` (``sam3_agent._prompts`` in the wheel)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import jinja2
import jinja2.meta
import jinja2.runtime

from sam3_agent.values.config import ToolSet
from sam3_agent.values.errors import UserError
from sam3_agent.values.text import one_line

if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.resources.abc import Traversable

logger = logging.getLogger(__name__)

SUFFIX = ".j2"

TEMPLATES: Mapping[str, frozenset[str]] = {
    "system": frozenset({"tools", "protocol"}),
    "user_task": frozenset({"query", "tried_phrases"}),
    "checker_system": frozenset(),
    "checker_user": frozenset({"query", "number", "total"}),
    "feedback": frozenset(),
    "context_archive": frozenset({"lines"}),
    "context_digests": frozenset({"texts"}),
    "digest_system": frozenset({"max_words"}),
    "digest_user": frozenset({"query", "rounds"}),
}
"""Every template of a set, with the variables it is rendered with (``feedback``: one macro
per message, with the canonical set's argument names)."""

PromptKind = Literal["image", "video"]

VIDEO_DIR = "video"  # the video agent's own templates, over the image set's
EXTENDED_DIR = "extended"  # read for the extended tool set only: the paper set's version stays
EXTENDED_FEEDBACK = "feedback_extended"  # the extended set's messages, beside ``feedback``'s

EXTENDED_TEMPLATES: Mapping[str, frozenset[str]] = {
    "tool_rules": frozenset(),
    "kept_note": frozenset({"kept_masks"}),
    EXTENDED_FEEDBACK: frozenset(),
}
"""The extended tool set's templates (a video set reads ``video/extended/`` over ``extended/``)."""

VIDEO_TEMPLATES: Mapping[str, frozenset[str]] = {
    **TEMPLATES,
    "checker_user": frozenset({"query", "number", "total", "extent", "attempt"}),
}
"""The video agent's templates: its checker is also told the track's extent and the look."""

BUILTIN_NAME = "builtin"

# Sample values used to check that a set renders: one per variable or macro argument name
# the code passes. A name missing here gets a plain string.
_SAMPLES: Mapping[str, Any] = {
    "protocol": "tags",
    "query": "the red cup on the left",
    "tried_phrases": ["cup", "mug"],
    "number": 2,
    "total": 3,
    "phrase": "red cup",
    "count": 2,
    "kept": [1, 3],
    "tried": ["cup", "red cup"],
    "name": "segment_phrase",
    "names": ["segment_phrase", "examine_each_mask"],
    "detail": "Expecting value: line 1 column 1 (char 0)",
    "problems": "missing parameter 'text_prompt'",
    "expected": '{"text_prompt": "<a short noun phrase>"}',
    "bad": [4],
    "used": 20,
    "extent": "frames 3 to 41 (0.3 s to 4.1 s), in 12 of the 16 frames shown",
    "attempt": 2,
    "kept_masks": [{"label": "K1", "phrase": "man"}, {"label": "K2", "phrase": "dog"}],
    "pairs": [[1, "K1"], [3, "K2"]],
    "uncertain": [2],
    "first": 3,
    "last": 41,
    "start_s": 0.3,
    "end_s": 4.1,
    "present": 12,
    "lines": ['round 2: segment_phrase "cup" gave 3 masks', "round 3: examined: kept 1, 3"],
    "texts": ['Rounds 1-4: "cup" gave 3 masks; masks 1 and 3 accepted.'],
    "max_words": 200,
    "tools": [
        {
            "name": "segment_phrase",
            "description": "Ask SAM 3 to segment every instance of a short noun phrase.",
            "parameters_text": '"text_prompt": a short noun phrase (string).',
            "example": '<tool>{"name": "segment_phrase", '
            '"parameters": {"text_prompt": "cup"}}</tool>',
        }
    ],
    "rounds": [
        {"round": 1, "reply": '<tool>{"name": "segment_phrase"}</tool>', "result": "3 masks"},
        {"round": 2, "reply": "<tool>...</tool>", "result": "kept 1, 3"},
    ],
}


class PromptSet:
    """One loaded, checked prompt set (:func:`load_prompt_set`); ``version`` hashes every
    template's name and bytes: equal versions render equal prompts."""

    def __init__(self, name: str, path: str, sources: Mapping[str, str]) -> None:
        self.name = name
        self.path = path
        self.sources = dict(sorted(sources.items()))
        digest = hashlib.sha256()
        for file_name, text in self.sources.items():
            digest.update(file_name.encode("utf-8") + b"\0" + text.encode("utf-8") + b"\0")
        self.version = "sha256:" + digest.hexdigest()[:16]
        # Jinja's defaults otherwise: no autoescaping, trailing newlines and blocks kept as is.
        self._env = jinja2.Environment(
            loader=jinja2.DictLoader(self.sources), undefined=jinja2.StrictUndefined
        )
        self._feedback: Any = None

    def __repr__(self) -> str:
        return f"PromptSet(name={self.name!r}, path={self.path!r}, version={self.version!r})"

    def describe(self) -> dict[str, str]:
        """``{"name", "path", "version"}``: what ``result.json`` records."""
        return {"name": self.name, "path": self.path, "version": self.version}

    def saved(self) -> dict[str, Any]:
        """What a run directory keeps to render with this set again (:meth:`from_saved`)."""
        return {"name": self.name, "path": self.path, "sources": dict(self.sources)}

    @classmethod
    def from_saved(cls, saved: Mapping[str, Any]) -> PromptSet:
        """The set :meth:`saved` described (checked when first loaded)."""
        return cls(str(saved["name"]), str(saved["path"]), saved["sources"])

    def identity(self) -> dict[str, str]:
        """``{"name", "version"}``: what makes two runs comparable (the path may move)."""
        return {"name": self.name, "version": self.version}

    def render(self, template: str, **variables: Any) -> str:
        """Render ``<template>.j2`` (``jinja2.UndefinedError`` on a missing variable)."""
        return self._env.get_template(template + SUFFIX).render(**variables).strip()

    def feedback(self, message: str, /, **variables: Any) -> str:
        """One of the messages (macros) of ``feedback.j2``."""
        macro = self.feedback_macros().get(message)
        if macro is None:
            raise KeyError(f"no feedback message named {message!r} in {self.path}/feedback.j2")
        missing = [a for a in macro.arguments if a not in variables]
        if missing:
            raise jinja2.UndefinedError(f"feedback {message!r} is missing variables {missing}")
        return str(macro(**variables)).strip()

    def feedback_macros(self) -> dict[str, Any]:
        if self._feedback is None:
            files = ["feedback", EXTENDED_FEEDBACK]
            self._feedback = {
                name: value
                for file in files
                if file + SUFFIX in self.sources
                for name, value in vars(self._env.get_template(file + SUFFIX).module).items()
                if isinstance(value, jinja2.runtime.Macro)
            }
        return dict(self._feedback)


# --------------------------------------------------------------------------- loading


def canonical_dir() -> Traversable:
    """The canonical set: the wheel's data package, else ``prompts/`` beside the imported
    package (never through the import system: another checkout cannot lend its prompts)."""
    packaged = resources.files("sam3_agent") / "_prompts"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "prompts"
    if checkout.is_dir():
        return checkout
    raise UserError(
        f"the prompt templates are missing: neither {packaged} nor {checkout} exists "
        "(a broken installation)"
    )


ToolDocs = Sequence[Mapping[str, str]]  # what system.j2 lists per tool (tools.tool_docs)


@cache
def default_prompt_set(kind: PromptKind = "image", tool_set: ToolSet = "paper") -> PromptSet:
    """The canonical set of a medium and a tool set, loaded and checked once per process."""
    return _load(canonical_dir(), BUILTIN_NAME, kind, tool_set, canonical=True)


def load_prompt_set(
    directory: str | Path | None = None,
    *,
    tool_docs: ToolDocs | None = None,
    kind: PromptKind = "image",
    tool_set: ToolSet = "paper",
) -> PromptSet:
    """The prompt set in ``directory`` (None: the canonical one) for ``kind`` and ``tool_set``
    (the canonical ``video/``, ``extended/`` where it has none), checked completely; a UserError."""
    if directory is None:
        prompt_set = default_prompt_set(kind, tool_set)
    else:
        path = Path(directory).expanduser()
        if not path.is_dir():
            raise UserError(f"prompt set {path} is not a directory")
        path = path.resolve()
        default_prompt_set(kind, tool_set)  # the reference, checked first
        prompt_set = _load(path, path.name, kind, tool_set, canonical=False)
    if tool_docs is not None:
        for protocol in ("tags", "native"):
            variables = {"tools": list(tool_docs), "protocol": protocol}
            _try(prompt_set.path, "system" + SUFFIX, prompt_set.render, "system", variables)
    return prompt_set


def _templates(kind: PromptKind, tool_set: ToolSet) -> dict[str, frozenset[str]]:
    """The templates a set of ``kind`` and ``tool_set`` holds, with their variables."""
    templates = dict(VIDEO_TEMPLATES if kind == "video" else TEMPLATES)
    if tool_set == "extended":
        templates.update(EXTENDED_TEMPLATES)
    return templates


def _load(
    folder: Traversable, name: str, kind: PromptKind, tool_set: ToolSet, *, canonical: bool
) -> PromptSet:
    where = str(folder)
    sources = _read_templates(folder, where)
    overlays: list[tuple[str, ...]] = [(VIDEO_DIR,)] if kind == "video" else []
    if tool_set == "extended":
        overlays += [(EXTENDED_DIR,)] + ([(VIDEO_DIR, EXTENDED_DIR)] if kind == "video" else [])
    for overlay in overlays:
        extra = folder.joinpath(*overlay)
        if not extra.is_dir():
            extra = canonical_dir().joinpath(*overlay)
        sources.update(_read_templates(extra, str(extra)))
        if len(overlay) == 1:
            name = f"{name}/{overlay[0]}"
    missing = [t + SUFFIX for t in _templates(kind, tool_set) if t + SUFFIX not in sources]
    if missing:
        raise UserError(
            f"prompt set {where} lacks {', '.join(missing)} "
            f"(a prompt set holds {', '.join(t + SUFFIX for t in TEMPLATES)})"
        )
    key = tuple(sorted(sources.items()))
    return _checked(name, where, key, canonical, kind, tool_set)


def _read_templates(folder: Traversable, where: str) -> dict[str, str]:
    sources: dict[str, str] = {}
    try:
        entries = [e for e in folder.iterdir() if e.name.endswith(SUFFIX) and e.is_file()]
    except OSError as e:
        raise UserError(f"prompt set {where} cannot be read: {e}") from e
    for entry in entries:
        try:
            sources[entry.name] = entry.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise UserError(f"prompt set {where}: {entry.name} is not UTF-8 ({e.reason})") from e
        except OSError as e:
            raise UserError(f"prompt set {where}: {entry.name} cannot be read: {e}") from e
    return sources


@lru_cache(maxsize=32)
def _checked(
    name: str,
    where: str,
    sources: tuple[tuple[str, str], ...],
    canonical: bool,
    kind: PromptKind,
    tool_set: ToolSet,
) -> PromptSet:
    prompt_set = PromptSet(name, where, dict(sources))
    reference = prompt_set if canonical else default_prompt_set(kind, tool_set)
    _check(prompt_set, reference, _templates(kind, tool_set))
    logger.debug("prompt set %s (%s) from %s", name, prompt_set.version, where)
    return prompt_set


# --------------------------------------------------------------------------- checking


def _check(
    prompt_set: PromptSet, reference: PromptSet, templates: Mapping[str, frozenset[str]]
) -> None:
    where = prompt_set.path
    env = prompt_set._env
    for template, allowed in templates.items():
        file_name = template + SUFFIX
        try:
            used = jinja2.meta.find_undeclared_variables(env.parse(prompt_set.sources[file_name]))
        except jinja2.TemplateSyntaxError as e:
            raise UserError(f"prompt set {where}: {file_name} line {e.lineno}: {e.message}") from e
        unknown = sorted(used - allowed)
        if unknown:
            passed = ", ".join(sorted(allowed)) or "no variables"
            raise UserError(
                f"prompt set {where}: {file_name} uses {', '.join(unknown)}, "
                f"but the agent renders it with {passed}"
            )
    try:
        macros = prompt_set.feedback_macros()
    except Exception as e:  # any failure of the template's top level, whatever its type
        raise UserError(f"prompt set {where}: feedback.j2 does not load: {one_line(e)}") from e
    for message, wanted in reference.feedback_macros().items():
        macro = macros.get(message)
        if macro is None:
            raise UserError(f"prompt set {where}: feedback.j2 has no macro {message}")
        if set(macro.arguments) != set(wanted.arguments):
            raise UserError(
                f"prompt set {where}: feedback.j2 macro {message} takes "
                f"({', '.join(macro.arguments)}); the agent passes ({', '.join(wanted.arguments)})"
            )
    for template, variables in _sample_renders(templates):
        _try(where, template + SUFFIX, prompt_set.render, template, variables)
    for message, macro in macros.items():
        if message in reference.feedback_macros():
            args = {a: _SAMPLES.get(a, "sample") for a in macro.arguments}
            _try(where, f"feedback.j2 macro {message}", prompt_set.feedback, message, args)


def _sample_renders(
    templates: Mapping[str, frozenset[str]],
) -> Iterator[tuple[str, dict[str, Any]]]:
    for protocol in ("tags", "native"):
        yield "system", {"tools": _SAMPLES["tools"], "protocol": protocol}
    for template, names in templates.items():
        if template not in ("system", "feedback", EXTENDED_FEEDBACK):
            yield template, {n: _SAMPLES.get(n, "sample") for n in names}
    yield "user_task", {"query": _SAMPLES["query"], "tried_phrases": []}


def _try(
    where: str, what: str, render: Callable[..., str], name: str, variables: dict[str, Any]
) -> None:
    try:
        render(name, **variables)
    except Exception as e:  # a template can fail in any way (a filter on a bad type, ...)
        raise UserError(f"prompt set {where}: {what} does not render: {one_line(e)}") from e
