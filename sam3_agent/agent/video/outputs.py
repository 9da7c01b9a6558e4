"""A video session's files: ``result.json``, ``overlay.mp4`` and ``contact_sheet.png``.

The names are :mod:`sam3_agent.agent.rundir`'s; the trace and checkpoint files are written
as for an image session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sam3_agent.agent import rundir
from sam3_agent.agent.video.result import VideoResult
from sam3_agent.media.video import VideoSource
from sam3_agent.media.video_render import contact_sheet
from sam3_agent.media.video_writer import write_overlay_video
from sam3_agent.values.files import atomic_write_json, write_png


def write_video_run(out: Path, result: VideoResult, video: VideoSource) -> dict[str, Any]:
    """Write the overlay video and the contact sheet of the selected tracks, then
    ``result.json`` last; returns its document and sets ``result.output_dir``.

    The overlay streams the frames again (one decoded at a time): memory stays flat in the
    clip's length.
    """
    result.output_dir = out
    document = result.to_json()
    write_overlay_video(video, result.tracks, out / rundir.OVERLAY_VIDEO, query=result.query)
    write_png(out / rundir.CONTACT_SHEET, contact_sheet(video, result.tracks, query=result.query))
    document["files"] = {"overlay": rundir.OVERLAY_VIDEO, "contact_sheet": rundir.CONTACT_SHEET}
    atomic_write_json(out / rundir.RESULT, document)
    return document
