"""The demo's video tab in a real browser (Playwright driving Debian's chromium, headless).

One session held mid-way (Run disabled while it runs, Stop ends it), then one to the end: the
rounds stream in and the overlay plays in the page's own video player (the H.264 MP4). No request may
leave the demo server. See ``test_browser`` for the browser's setup.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sam3_agent.apps.demo.server import create_app
from sam3_agent.apps.demo.sessions import VideoDemoRunner
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, OffsiteRequests, sync_api
from tests.support.demo_fixtures import CoffeeScript, coffee_runner, serve_app
from tests.support.openai_server import serve
from tests.support.video_demo import FRAMES, QUERY, HeldChat, VideoAgentBuilds, upload


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def test_run_stop_and_play_the_overlay(browser: Any, tmp_path: Path):
    chat = HeldChat(hold=1)  # the first session waits for the model in round 2
    with serve() as server:
        server.responder = CoffeeScript()
        video = VideoDemoRunner(VideoAgentBuilds(chat), tmp_path / "video")
        app = create_app(coffee_runner(server, tmp_path / "image"), video_runner=video)
        with serve_app(app) as url:
            context = browser.new_context(viewport={"width": 1500, "height": 1000})
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            requests = OffsiteRequests(page, url)
            try:
                page.goto(url + "/")
                page.get_by_role("tab", name="Video").click()
                page.locator("#s3a-video input[type=file]").set_input_files(str(upload(tmp_path)))
                ready = page.locator("#s3a-video-status .s3a-status", has_text="Video ready")
                ready.wait_for()
                assert f"{FRAMES} of {FRAMES} frames to track, 128x96" in ready.inner_text()
                page.locator("#s3a-video-query textarea").fill(QUERY)
                run = page.locator("#s3a-video-run")
                run.click()

                page.locator("#s3a-video-rounds .s3a-round").first.wait_for()
                assert run.is_disabled()  # one request per page at a time
                page.locator("#s3a-video-stop").click()
                page.locator("#s3a-video-status .s3a-status-stopped").wait_for()
                page.wait_for_function("!document.querySelector('#s3a-video-run').disabled")

                chat.hold = None  # the model answers every round now
                run.click()
                page.locator("#s3a-video-status .s3a-status-done").wait_for()
                assert "1 track(s)" in page.locator("#s3a-video-status").inner_text()
                assert page.locator("#s3a-video-rounds .s3a-round").count() == 2
                player = page.locator("#s3a-video-final video")
                player.wait_for()
                # The browser decodes the H.264 overlay: a frame is shown (readyState 2 is
                # HAVE_CURRENT_DATA), no media error, a 12-frame, 10 fps, 128x96 clip.
                page.wait_for_function(
                    "(v => v.readyState >= 2 || v.error)"
                    "(document.querySelector('#s3a-video-final video'))"
                )
                error, src, width, duration = player.evaluate(
                    "v => [v.error && v.error.code, v.currentSrc, v.videoWidth, v.duration]"
                )
                assert error is None and src.endswith("overlay.mp4")
                assert width == 128 and duration == pytest.approx(FRAMES / 10, abs=0.15)
                for name in ("result.json", "overlay.mp4", "contact_sheet.png"):
                    assert page.locator(f'#s3a-video-files a[download="{name}"]').count() == 1
                assert requests.offsite == []
            finally:
                context.close()
