"""The video agent's tools: the image agent's four, by the same names and handlers,
described for tracks (the session's scene makes them work on tracks)."""

from __future__ import annotations

from dataclasses import replace

from sam3_agent.agent.tools import TOOLS, Registry

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
    ),
    "examine_each_mask": replace(
        TOOLS["examine_each_mask"],
        description=(
            "Have every current track checked on its own against the request, over a few "
            "frames where it exists with a close-up of each. Rejected tracks are removed, "
            "tracks the checker could not settle are kept and marked Uncertain, and the rest "
            "are renumbered from 1 on a new sheet."
        ),
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
