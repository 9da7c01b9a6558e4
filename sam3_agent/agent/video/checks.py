"""``examine_each_mask`` on video: one isolated check per track, with an Uncertain verdict.

Each track's check is a fresh conversation, [checker system prompt, user(a sheet of a few
frames where the track exists, each with the track outlined beside a close-up; the query;
the track's extent)], run concurrently with the others (bounded by
``AgentConfig.check_concurrency``). A checker that cannot settle it from those frames answers
Uncertain and may name the frames it needs (``<frames>A-B</frames>``); the track then gets a
closer look over those frames (or its whole extent, denser), at most
``VideoOptions.uncertain_looks`` times. A track still Uncertain stays, marked, for the main
model to decide (the AgentRVOS idea: prune by Accept / Reject / Uncertain, narrowing to the
frames that still matter). Every call counts against ``max_mask_checks``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sam3_agent.agent.checks import CheckCall, CheckRequest, CheckResult
from sam3_agent.agent.parsing import Verdict, parse_frame_range, parse_verdict
from sam3_agent.agent.trace import check_record
from sam3_agent.media.sheet_layout import sample_positions
from sam3_agent.media.video_render import render_track_check
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart
from sam3_agent.values.tracks import Track, Tracks

if TYPE_CHECKING:
    from sam3_agent.agent.video.session import VideoSession

MAX_LOOK_FRAMES = 8
"""Frames a closer look may show (twice ``check_frames`` at most)."""


@dataclass(frozen=True)
class TrackVerdict:
    """The outcome of one track's check: its verdict after every look, and the looks."""

    number: int
    verdict: Verdict
    looks: int


async def check_tracks(session: VideoSession, tracks: Tracks) -> list[TrackVerdict]:
    """Check every track of ``tracks`` on its own (numbers 1-based, in order)."""
    semaphore = asyncio.Semaphore(session.config.check_concurrency)
    calls: list[CheckCall] = []
    shown: dict[int, EncodedImage] = {}
    results: dict[int, CheckResult] = {}

    async def one(index: int) -> TrackVerdict:
        async with semaphore:
            return await _check_track(session, tracks, index, calls, shown, results)

    tasks = [asyncio.ensure_future(one(i)) for i in range(len(tracks))]
    try:
        verdicts = list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    ordered = sorted(calls, key=lambda c: (c.number, c.attempt))
    estimates = [session.token_counter.messages(call.messages) for call in ordered]
    for tokens in estimates:
        session.usage.add_estimate("checks", tokens.text, tokens.image)
    if session.trace.enabled:
        for call, tokens in zip(ordered, estimates, strict=True):
            record = check_record(
                session.trace,
                round_number=session.round,
                call=call,
                result=results[call.number],
                tokens=tokens,
            )
            session.trace.record(record)
    total = len(tracks)
    # What the round's event shows of each check: the last sheet the checker saw.
    session.last_checks = [
        (CheckRequest(n, total, shown[n], shown[n], shown[n]), results[n]) for n in sorted(results)
    ]
    return verdicts


async def _check_track(
    session: VideoSession,
    tracks: Tracks,
    index: int,
    calls: list[CheckCall],
    shown: dict[int, EncodedImage],
    results: dict[int, CheckResult],
) -> TrackVerdict:
    number, total = index + 1, len(tracks)
    track = tracks[index]
    options, config = session.options, session.config
    within = track.extent
    count = options.check_frames
    result = CheckResult(number=number, verdict="reject")
    results[number] = result
    attempt = 0
    looks = 0
    for look in range(1 + options.uncertain_looks):
        if session.checks_left <= 0:
            break
        looks = look + 1
        name = f"r{session.round:03d}_check{number:02d}_look{looks}"
        image = await asyncio.to_thread(_render, session, track, number, count, within, name)
        shown[number] = image
        question = session.prompts.render(
            "checker_user",
            query=session.query,
            number=number,
            total=total,
            extent=session.extent_text(track),
            attempt=looks,
        )
        messages = [
            ChatMessage.text("system", session.checker_prompt),
            ChatMessage("user", (ImagePart(image), TextPart(question))),
        ]
        verdict: Verdict | None = None
        for _ in range(config.verdict_retries + 1):
            if session.checks_left <= 0:
                break
            attempt += 1
            started = time.perf_counter()
            session.checks_used += 1
            response = await session.chat_model.complete(messages)
            elapsed = time.perf_counter() - started
            result.usage = result.usage + response.usage
            session.usage.checks = session.usage.checks + response.usage
            result.cached_calls += int(response.cached)
            session.usage.cached_calls += int(response.cached)
            result.replies.append(response.text)
            verdict = parse_verdict(response.text, allow_uncertain=True)
            calls.append(CheckCall(number, attempt, messages, response, verdict, elapsed))
            if verdict is not None:
                break
            messages = [
                *messages,
                ChatMessage.text("assistant", response.text),
                ChatMessage.text("user", session.prompts.feedback("verdict_unclear")),
            ]
        if verdict is None:
            result.verdict, result.forced = "reject", True
            break
        result.verdict = verdict
        if verdict != "uncertain":
            break
        # A closer look: the frames the checker named (inside the track's extent), else the
        # whole extent, denser.
        named = parse_frame_range(result.replies[-1])
        within = _positions_of(session, named, track) or within
        count = min(MAX_LOOK_FRAMES, max(count, 2 * options.check_frames))
    return TrackVerdict(number, result.verdict, looks)


def _render(
    session: VideoSession,
    track: Track,
    number: int,
    count: int,
    within: tuple[int, int] | None,
    name: str,
) -> EncodedImage:
    single = Tracks(session.video.frame_count, session.video.size, (track,))
    positions = sample_positions(single, session.video.frame_count, count, within=within)
    pixels = render_track_check(
        session.video, track, positions, max_side=session.config.max_image_side, number=number
    )
    image = EncodedImage.encode(pixels, name, quality=session.config.jpeg_quality)
    session.trace.save_image(image)
    return image


def _positions_of(
    session: VideoSession, frames: tuple[int, int] | None, track: Track
) -> tuple[int, int] | None:
    """The positions of the source frames ``frames`` names, clipped to the track's extent;
    None when they miss it."""
    extent = track.extent
    if frames is None or extent is None:
        return None
    indices = session.video.indices
    inside = [p for p in range(extent[0], extent[1] + 1) if frames[0] <= indices[p] <= frames[1]]
    return (inside[0], inside[-1]) if inside else None
