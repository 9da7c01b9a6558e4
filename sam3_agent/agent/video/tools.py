"""The video agent's tools: the image agent's four, by the same names, over tracks.

``segment_phrase`` tracks a phrase through the clip and shows a sheet of frames with the
tracks numbered, each track's extent stated in text; ``examine_each_mask`` checks each
track on its own (:mod:`sam3_agent.agent.video.checks`), keeping Uncertain ones marked;
``select_masks_and_return`` and ``report_no_mask`` are the image agent's own handlers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sam3_agent.agent.steps import Observation, ToolMistake, ToolOutcome
from sam3_agent.agent.tools import (
    TOOLS,
    NoParams,
    Registry,
    SegmentPhraseParams,
    masks_observation,
    normalize_phrase,
)
from sam3_agent.agent.video.checks import check_tracks
from sam3_agent.values.text import echo, echo_list

if TYPE_CHECKING:
    from sam3_agent.agent.video.session import VideoSession


async def _segment_phrase(session: VideoSession, params: SegmentPhraseParams) -> ToolOutcome:
    prompts = session.prompts
    phrase = params.text_prompt
    if normalize_phrase(phrase) in {normalize_phrase(p) for p in session.phrases}:
        raise ToolMistake(
            prompts.feedback(
                "duplicate_phrase", phrase=echo(phrase), tried=echo_list(session.phrases)
            )
        )
    tracks, _ = await session.segment(phrase)
    if len(tracks) == 0:
        text = prompts.feedback("no_masks", phrase=phrase)
        return ToolOutcome("segment", Observation(text), phrase=phrase)
    image = await session.show_masks(tracks)
    text = prompts.feedback("masks_found", phrase=phrase, count=len(tracks))
    text += "\n" + session.describe_tracks(tracks)
    return ToolOutcome(
        "segment", masks_observation(prompts, text, image, len(tracks)), phrase=phrase
    )


async def _examine_each_mask(session: VideoSession, params: NoParams) -> ToolOutcome:
    prompts = session.prompts
    current = session.require_masks("examine_each_mask")
    if session.checks_left < len(current):
        raise ToolMistake(prompts.feedback("check_budget_spent", used=session.checks_used))
    with session.timed("checks"):
        verdicts = await check_tracks(session, current)
    # Accepted and Uncertain tracks stay; the model decides on the Uncertain ones.
    kept_numbers = [v.number for v in verdicts if v.verdict != "reject"]
    if not kept_numbers:
        session.clear_masks()
        return ToolOutcome(
            "examine", Observation(prompts.feedback("all_rejected", total=len(current)))
        )
    survivors = await session.select(current, [n - 1 for n in kept_numbers])
    session.current = survivors
    image = await session.show_masks(survivors)
    uncertain_old = {v.number for v in verdicts if v.verdict == "uncertain"}
    uncertain = [i + 1 for i, n in enumerate(kept_numbers) if n in uncertain_old]
    if uncertain:
        text = prompts.feedback(
            "examined_uncertain", total=len(current), kept=kept_numbers, uncertain=uncertain
        )
    else:
        text = prompts.feedback("examined", total=len(current), kept=kept_numbers)
    text += "\n" + session.describe_tracks(survivors)
    return ToolOutcome("examine", masks_observation(prompts, text, image, len(survivors)))


VIDEO_TOOLS: Registry = {
    **TOOLS,
    "segment_phrase": replace(
        TOOLS["segment_phrase"],
        description=(
            "Ask SAM 3 to find every instance of a short noun phrase in every frame of the "
            "clip and follow each through time as one track. All current tracks are replaced "
            "by the new ones, which you receive numbered from 1 (highest score first) on a "
            "sheet of frames where they exist, with the frames each track spans."
        ),
        handler=_segment_phrase,
    ),
    "examine_each_mask": replace(
        TOOLS["examine_each_mask"],
        description=(
            "Have every current track checked on its own against the request, over a few "
            "frames where it exists with a close-up of each. Rejected tracks are removed, "
            "tracks the checker could not settle are kept and marked Uncertain, and the rest "
            "are renumbered from 1 on a new sheet."
        ),
        handler=_examine_each_mask,
    ),
    "select_masks_and_return": replace(
        TOOLS["select_masks_and_return"],
        description=(
            "Finish with the tracks that answer the request, given by their numbers on the "
            "most recent sheet of numbered tracks."
        ),
        parameters_text='"final_answer_masks": a list of track numbers (integers).',
    ),
    "report_no_mask": replace(
        TOOLS["report_no_mask"],
        description="Finish without tracks, when nothing in the clip matches the request.",
    ),
}
"""The video agent's tools, in the image agent's order."""
