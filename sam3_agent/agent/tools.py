"""The tool registries: the paper's four (``TOOLS``) and the extended set (``EXTENDED_TOOLS``);
every misuse raises :class:`~sam3_agent.agent.steps.ToolMistake`, its text sent to the model."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sam3_agent.agent.parsing import ToolCall
from sam3_agent.agent.steps import Final, Observation, ToolMistake, ToolOutcome
from sam3_agent.backends.segment_args import MAX_PHRASE_CHARS, clean_phrase
from sam3_agent.values.detections import Candidates, Detections, Exemplars
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ToolSpec
from sam3_agent.values.text import ECHO_LIMIT, echo, echo_list

if TYPE_CHECKING:
    from sam3_agent.agent.prompts import PromptSet
    from sam3_agent.agent.session import Session


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SegmentPhraseParams(_Params):
    text_prompt: str = Field(
        min_length=1,
        max_length=MAX_PHRASE_CHARS,
        description=(
            f"A short noun phrase, at most {MAX_PHRASE_CHARS} characters; SAM 3 reads about "
            "the first 30 words and ignores the rest."
        ),
    )

    @field_validator("text_prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # The segmenters' own sanitiser: a phrase accepted here is accepted by every one.
        cleaned = clean_phrase(value)
        if not cleaned:
            raise ValueError("must not be blank")
        return cleaned


class ExemplarPhraseParams(SegmentPhraseParams):
    like: list[int] = Field(default_factory=list, max_length=16)
    unlike: list[int] = Field(default_factory=list, max_length=16)


class NoParams(_Params):
    pass


class SelectMasksParams(_Params):
    final_answer_masks: list[int]


class KeepMasksParams(_Params):
    masks: list[int] = Field(min_length=1, max_length=64)


Handler = Callable[[Any, Any], Awaitable[ToolOutcome]]  # (session, validated parameters)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: type[_Params]
    parameters_text: str
    example: dict[str, Any]
    handler: Handler
    needs_masks: bool = False


def normalize_phrase(phrase: str) -> str:
    """The form phrases are compared in: case-folded, whitespace collapsed."""
    return " ".join(phrase.casefold().split())


def mask_numbers_to_indices(numbers: Sequence[int], count: int, prompts: PromptSet) -> list[int]:
    """The one place where the model's 1-based mask numbers become 0-based indices (sorted,
    merged); a :class:`ToolMistake` for none or one outside ``1..count``."""
    if not numbers:
        raise ToolMistake(prompts.feedback("empty_selection", count=count))
    bad = sorted({n for n in numbers if not 1 <= n <= count})
    if bad:
        raise ToolMistake(prompts.feedback("numbers_out_of_range", bad=bad, count=count))
    return sorted({n - 1 for n in numbers})


def masks_observation(
    session: Session[Any], text: str, image: EncodedImage, shown: Candidates
) -> Observation:
    """A result showing ``shown`` numbered, with the stand-ins for a hidden image."""
    described = session.scene.describe(shown, session.prompts)
    if described is not None:
        text += "\n" + described
    count, prompts = len(shown), session.prompts
    return Observation(
        text,
        image,
        image_dropped_text=prompts.feedback("masks_image_dropped", count=count),
        image_gone_text=prompts.feedback("masks_image_gone", count=count),
    )


def exemplars_of(
    current: Detections, like: Sequence[int], unlike: Sequence[int], prompts: PromptSet
) -> Exemplars:
    """The boxes of masks ``like`` (positive) and ``unlike`` (negative), 1-based numbers on
    the latest image, as SAM 3's exemplars."""
    boxes: list[tuple[int, int, int, int]] = []
    positive: list[bool] = []
    for numbers, label in ((like, True), (unlike, False)):
        if numbers:
            for i in mask_numbers_to_indices(numbers, len(current), prompts):
                x0, y0, x1, y1 = (int(v) for v in current.mask_boxes[i])
                boxes.append((x0, y0, x1, y1))
                positive.append(label)
    return Exemplars(tuple(boxes), tuple(positive))


def tried_name(phrase: str, exemplars: Exemplars | None) -> str:
    """How a search is named among the tried ones: the phrase, with its exemplars' boxes
    (the same phrase with other exemplars is another search)."""
    if not exemplars:
        return phrase
    parts = []
    for label in (True, False):
        boxes = [b for b, p in zip(exemplars.boxes, exemplars.positive, strict=True) if p is label]
        if boxes:
            shown = " ".join(",".join(map(str, b)) for b in boxes)
            parts.append(f"{'like' if label else 'unlike'} {shown}")
    return f"{phrase} [{'; '.join(parts)}]"


async def _segment_phrase(session: Session[Any], params: SegmentPhraseParams) -> ToolOutcome:
    prompts, text = session.prompts, params.text_prompt
    exemplars = None
    if isinstance(params, ExemplarPhraseParams) and (params.like or params.unlike):
        current = session.require_masks("segment_phrase")
        exemplars = exemplars_of(current, params.like, params.unlike, prompts)
    phrase, tried = tried_name(text, exemplars), session.phrases
    if normalize_phrase(phrase) in {normalize_phrase(p) for p in tried}:
        raise ToolMistake(
            prompts.feedback("duplicate_phrase", phrase=echo(phrase), tried=echo_list(tried))
        )
    found, used = await session.segment(text, exemplars, tried_as=phrase)
    cut = prompts.feedback("phrase_cut", phrase=text, used=used) + "\n" if used != text else ""
    if len(found) == 0:
        text = cut + prompts.feedback("no_masks", phrase=phrase)
        return ToolOutcome("segment", Observation(text), phrase=phrase)
    image = await session.show_masks(found)
    text = cut + prompts.feedback("masks_found", phrase=phrase, count=len(found))
    observation = masks_observation(session, text, image, found)
    return ToolOutcome("segment", observation, phrase=phrase)


async def _examine_each_mask(session: Session[Any], params: NoParams) -> ToolOutcome:
    prompts = session.prompts
    current = session.require_masks("examine_each_mask")
    if session.checks_left < len(current):
        raise ToolMistake(prompts.feedback("check_budget_spent", used=session.checks_used))
    results = await session.check(current)
    # Accepted and Uncertain candidates stay; the model decides on the Uncertain ones.
    kept = [r.number for r in results if r.verdict != "reject"]
    if not kept:
        session.current = None
        return ToolOutcome(
            "examine", Observation(prompts.feedback("all_rejected", total=len(current)))
        )
    survivors = await session.select(current, [n - 1 for n in kept])
    session.current = survivors
    image = await session.show_masks(survivors)
    unsure = {r.number for r in results if r.verdict == "uncertain"}
    uncertain = [i + 1 for i, n in enumerate(kept) if n in unsure]
    if uncertain:
        text = prompts.feedback(
            "examined_uncertain", total=len(current), kept=kept, uncertain=uncertain
        )
    else:
        text = prompts.feedback("examined", total=len(current), kept=kept)
    return ToolOutcome("examine", masks_observation(session, text, image, survivors))


async def _select_masks_and_return(session: Session[Any], params: SelectMasksParams) -> ToolOutcome:
    """The selection, with the kept masks (the extended tools') if any, the same object
    merged; the kept ones alone for an empty selection."""
    kept = session.kept
    if kept and not params.final_answer_masks:
        return ToolOutcome("final", Observation(""), final=Final("masks", kept))
    current = session.require_masks("select_masks_and_return")
    indices = mask_numbers_to_indices(params.final_answer_masks, len(current), session.prompts)
    selected = await session.select(current, indices)
    if kept:
        selected, _ = await asyncio.to_thread(kept.merged, selected)
    return ToolOutcome("final", Observation(""), final=Final("masks", selected))


async def _keep_masks(session: Session[Any], params: KeepMasksParams) -> ToolOutcome:
    current = session.require_masks("keep_masks")
    indices = mask_numbers_to_indices(params.masks, len(current), session.prompts)
    where = await session.keep(current, indices)
    pairs = [[i + 1, f"K{w + 1}"] for i, w in zip(indices, where, strict=True)]
    kept = 0 if session.kept is None else len(session.kept)
    text = session.prompts.feedback("masks_kept", pairs=pairs, total=kept)
    return ToolOutcome("keep", Observation(text))


async def _report_no_mask(session: Session[Any], params: NoParams) -> ToolOutcome:
    return ToolOutcome("final", Observation(""), final=Final("no_mask", session.scene.empty()))


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="segment_phrase",
            description=(
                "Ask SAM 3 to segment every instance of a short noun phrase in the original "
                "image. All current masks are replaced by the new ones, which you receive "
                "drawn on the image and numbered from 1, highest score first."
            ),
            params=SegmentPhraseParams,
            parameters_text='"text_prompt": a short noun phrase (string).',
            example={"text_prompt": "person"},
            handler=_segment_phrase,
        ),
        Tool(
            name="examine_each_mask",
            description=(
                "Have every current mask checked on its own against the request, with a "
                "close-up of each. Rejected masks are removed and the rest are renumbered "
                "from 1 on a new image."
            ),
            params=NoParams,
            parameters_text="none; pass an empty object.",
            example={},
            handler=_examine_each_mask,
            needs_masks=True,
        ),
        Tool(
            name="select_masks_and_return",
            description=(
                "Finish with the masks that answer the request, given by their numbers on "
                "the most recent image of numbered masks."
            ),
            params=SelectMasksParams,
            parameters_text='"final_answer_masks": a list of mask numbers (integers).',
            example={"final_answer_masks": [1, 3]},
            handler=_select_masks_and_return,
            needs_masks=True,
        ),
        Tool(
            name="report_no_mask",
            description=("Finish without masks, when nothing in the image matches the request."),
            params=NoParams,
            parameters_text="none; pass an empty object.",
            example={},
            handler=_report_no_mask,
        ),
    )
}


Registry = dict[str, Tool]  # tools by name


def with_kept(registry: Registry, what: str = "masks") -> Registry:
    """``registry`` with ``keep_masks`` and a selection that answers with the kept set too;
    ``what``: the medium's word for its candidates (``masks``, ``tracks``)."""
    select = registry["select_masks_and_return"]
    keep = Tool(
        name="keep_masks",
        description=(
            f"Keep {what} of the most recent numbered image as part of the final answer, "
            f"given by their numbers. Kept {what} stay when segment_phrase replaces the "
            "current ones; later images show them in white, labelled K1, K2 and so on. Use "
            "it when the request names several things that need different phrases."
        ),
        params=KeepMasksParams,
        parameters_text=f'"masks": a list of {what[:-1]} numbers (integers).',
        example={"masks": [1, 2]},
        handler=_keep_masks,
        needs_masks=True,
    )
    tools = {}
    for name, tool in registry.items():
        tools[name] = tool
        if name == "examine_each_mask":
            tools[keep.name] = keep
    tools[select.name] = replace(
        select,
        description=select.description
        + (
            f" Kept {what} are always part of the answer: the selected ones are added to "
            f"them, and an empty list answers with the kept {what} alone."
        ),
    )
    return tools


def extended(registry: Registry) -> Registry:
    """``registry`` (a medium's paper tools) with the extended set's powers: exemplars on
    ``segment_phrase`` and :func:`with_kept`."""
    segment = registry["segment_phrase"]
    return {
        **with_kept(registry),
        "segment_phrase": replace(
            segment,
            description=segment.description
            + (
                " Optionally give masks of the most recent image as visual examples: `like` "
                "lists masks that show what you want, `unlike` masks that show what to leave "
                "out; SAM 3 then looks for things resembling the first and not the second."
            ),
            params=ExemplarPhraseParams,
            parameters_text=segment.parameters_text
            + ' Optional: "like" and "unlike", lists of mask numbers (integers).',
            example={"text_prompt": "apple", "like": [2], "unlike": [4]},
        ),
    }


EXTENDED_TOOLS: Registry = extended(TOOLS)


def tool_docs(registry: Registry = TOOLS) -> list[dict[str, str]]:
    """What the system prompt lists for each tool."""
    return [
        {
            "name": t.name,
            "description": t.description,
            "parameters_text": t.parameters_text,
            "example": ToolCall(t.name, t.example).to_tag(),
        }
        for t in registry.values()
    ]


def tool_specs(registry: Registry = TOOLS) -> list[ToolSpec]:
    """The tools as JSON-schema specs, for native tool calling."""
    return [
        ToolSpec(t.name, t.description, t.params.model_json_schema()) for t in registry.values()
    ]


def _describe_errors(error: ValidationError) -> str:
    problems = []
    for e in error.errors():
        where = echo(".".join(str(p) for p in e["loc"]) or "parameters")
        if e["type"] == "extra_forbidden":
            problems.append(f"unexpected parameter '{where}'")
        elif e["type"] == "missing":
            problems.append(f"missing parameter '{where}'")
        else:
            problems.append(f"'{where}' {echo(e['msg'].lower())} (got {echo(e.get('input'))})")
    return "; ".join(echo_list(problems, item_limit=2 * ECHO_LIMIT))


async def execute(session: Session[Any], call: ToolCall, registry: Registry = TOOLS) -> ToolOutcome:
    """Validate ``call`` and run its handler (:class:`ToolMistake` for model mistakes)."""
    prompts = session.prompts
    tool = registry.get(call.name)
    if tool is None:
        names = list(registry)
        raise ToolMistake(prompts.feedback("unknown_tool", name=echo(call.name), names=names))
    try:
        params = tool.params.model_validate(call.parameters)
    except ValidationError as e:
        raise ToolMistake(
            prompts.feedback(
                "bad_parameters",
                name=tool.name,
                problems=_describe_errors(e),
                expected=tool.parameters_text,
            )
        ) from e
    if tool.needs_masks and not session.phrases:
        raise ToolMistake(prompts.feedback("must_segment_first", name=tool.name))
    return await tool.handler(session, params)
