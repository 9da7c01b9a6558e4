"""The demo page in a real browser: Playwright driving Debian's chromium (headless).

Upload, query, run; the rounds stream in, the final image appears, ``result.json`` downloads;
an unreadable image shows a message. Every request the page makes is recorded: one to any
host but the demo server fails the test (the page must work offline). The first test saves
a screenshot: under the test's temporary directory, or, with
``SAM3_AGENT_DEMO_SCREENSHOT=docs/demo.png``, the one the README shows (opt-in, so a test
run leaves the checkout clean).

The MLLM is the scripted server on 127.0.0.1 and SAM 3 the fake segmenter (see
``demo_fixtures``); ``.ci/run`` installs chromium with apt-get.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from sam3_agent.apps.demo.server import bundled_examples, create_app
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, OffsiteRequests, sync_api
from tests.support.demo_fixtures import COFFEE, QUERY, REPO, CoffeeScript, coffee_runner, serve_app
from tests.support.openai_server import ScriptedServer, serve

SCREENSHOT_ENV = "SAM3_AGENT_DEMO_SCREENSHOT"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with serve() as state:
        state.responder = CoffeeScript()
        yield state


@pytest.fixture
def demo_url(server: ScriptedServer, tmp_path: Path) -> Iterator[str]:
    app = create_app(coffee_runner(server, tmp_path / "runs"), examples=bundled_examples())
    with serve_app(app) as url:
        yield url


def save_small(png: Path) -> None:
    """Re-save a screenshot with a 256-colour palette: a third of the bytes in the repo."""
    with Image.open(png) as shot:
        small = shot.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(png, optimize=True)


DESKTOP = {"width": 1500, "height": 1000}
PHONE = {"width": 390, "height": 844}


def open_page(
    browser: Any, url: str, viewport: dict[str, int] = DESKTOP
) -> tuple[Any, Any, OffsiteRequests]:
    context = browser.new_context(viewport=viewport, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    requests = OffsiteRequests(page, url)
    page.goto(url + "/")
    page.locator("#s3a-run").wait_for()
    return context, page, requests


def test_upload_run_watch_the_rounds_and_download(
    browser: Any, demo_url: str, server: ScriptedServer, tmp_path: Path
):
    context, page, requests = open_page(browser, demo_url)
    try:
        page.locator("#s3a-image input[type=file]").set_input_files(str(COFFEE))
        page.locator("#s3a-status .s3a-status", has_text="Image ready").wait_for()
        page.locator("#s3a-query textarea").fill(QUERY)
        page.locator("#s3a-run").click()

        # Round 1 is on the page before the session ends: the rounds stream.
        page.locator("#s3a-rounds .s3a-round").first.wait_for()
        page.locator("#s3a-status .s3a-status-done").wait_for()
        rounds = page.locator("#s3a-rounds .s3a-round summary")
        assert rounds.count() == 3
        assert "segment_phrase" in rounds.nth(0).inner_text()
        assert page.locator("#s3a-rounds .s3a-check.s3a-reject").count() == 1
        assert page.locator("#s3a-rounds img.s3a-masks").count() == 2
        page.locator("#s3a-final img").first.wait_for(state="visible")
        assert "1 mask(s)" in page.locator("#s3a-status").inner_text()
        sync_api.expect(page.locator("#s3a-run")).to_be_enabled(timeout=WAIT_MS)

        link = page.locator('#s3a-files a[download="result.json"]')
        with page.expect_download() as download_info:
            link.click()
        saved = tmp_path / "downloaded.json"
        download_info.value.save_as(saved)
        document = json.loads(saved.read_text())
        assert document["status"] == "masks" and document["query"] == QUERY
        assert len(document["masks"]) == 1 and document["rounds"] == 3

        screenshot = REPO / os.environ.get(SCREENSHOT_ENV, tmp_path / "demo.png")
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
        save_small(screenshot)
        assert requests.offsite == []
    finally:
        context.close()


def test_an_unreadable_image_shows_a_message(browser: Any, demo_url: str, tmp_path: Path):
    broken = tmp_path / "holiday.jpg"
    broken.write_bytes(b"\xff\xd8 not really a JPEG")
    context, page, requests = open_page(browser, demo_url)
    try:
        page.locator("#s3a-image input[type=file]").set_input_files(str(broken))
        error = page.locator("#s3a-status .s3a-status-error")
        error.wait_for()
        assert "cannot read image holiday.jpg: " in error.inner_text()

        page.locator("#s3a-query textarea").fill(QUERY)
        page.locator("#s3a-run").click()
        page.locator("#s3a-status .s3a-status-error", has_text="cannot read").wait_for()
        assert "Traceback" not in page.content()
        sync_api.expect(page.locator("#s3a-run")).to_be_enabled(timeout=WAIT_MS)
        assert requests.offsite == []
    finally:
        context.close()


def test_stop_ends_a_session_on_the_page(browser: Any, demo_url: str, server: ScriptedServer):
    server.responder = CoffeeScript(hold=2)  # the model never answers round 2
    context, page, requests = open_page(browser, demo_url)
    try:
        page.locator("#s3a-image input[type=file]").set_input_files(str(COFFEE))
        page.locator("#s3a-status .s3a-status", has_text="Image ready").wait_for()
        page.locator("#s3a-query textarea").fill(QUERY)
        page.locator("#s3a-run").click()
        page.locator("#s3a-rounds .s3a-round").first.wait_for()
        page.locator("#s3a-stop").click()
        page.locator("#s3a-status .s3a-status-stopped").wait_for()
        assert page.locator("#s3a-rounds .s3a-round").count() == 1
        assert page.locator('#s3a-files a[download="result.json"]').count() == 1
        sync_api.expect(page.locator("#s3a-run")).to_be_enabled(timeout=WAIT_MS)
        assert requests.offsite == []
    finally:
        context.close()


def test_run_and_enter_are_off_while_a_session_runs(
    browser: Any, demo_url: str, server: ScriptedServer
):
    server.responder = CoffeeScript(hold=2)  # the model never answers round 2
    context, page, requests = open_page(browser, demo_url)
    try:
        page.locator("#s3a-image input[type=file]").set_input_files(str(COFFEE))
        page.locator("#s3a-status .s3a-status", has_text="Image ready").wait_for()
        query = page.locator("#s3a-query textarea")
        query.fill(QUERY)
        query.press("Enter")  # Enter starts a session as Run does
        page.locator("#s3a-rounds .s3a-round").first.wait_for()

        run = page.locator("#s3a-run")
        sync_api.expect(run).to_be_disabled(timeout=WAIT_MS)
        sync_api.expect(query).to_be_disabled(timeout=WAIT_MS)
        query.press("Enter")
        run.click(force=True)  # a click on the disabled button does nothing
        assert page.locator("#s3a-rounds .s3a-round").count() == 1
        assert "already running" not in page.locator("#s3a-status").inner_text()

        page.locator("#s3a-stop").click()
        page.locator("#s3a-status .s3a-status-stopped").wait_for()
        sync_api.expect(run).to_be_enabled(timeout=WAIT_MS)
        sync_api.expect(query).to_be_enabled(timeout=WAIT_MS)
        assert page.locator("#s3a-rounds .s3a-round").count() == 1
        assert requests.joins == 1  # the one session: nothing else reached the agent
        assert requests.offsite == []
    finally:
        context.close()


def test_on_a_phone_the_rounds_follow_the_status_line(
    browser: Any, demo_url: str, server: ScriptedServer
):
    server.responder = CoffeeScript()
    context, page, requests = open_page(browser, demo_url, PHONE)
    try:
        page.locator("#s3a-image input[type=file]").set_input_files(str(COFFEE))
        page.locator("#s3a-status .s3a-status", has_text="Image ready").wait_for()
        page.locator("#s3a-query textarea").fill(QUERY)
        page.locator("#s3a-run").click()
        page.locator("#s3a-status .s3a-status-done").wait_for()

        def box(selector: str) -> dict[str, float]:
            found = page.locator(selector).bounding_box()
            assert found is not None, selector
            return found

        status, rounds, final = box("#s3a-status"), box("#s3a-rounds"), box("#s3a-final")
        # Right under the status line (nothing between them), within the first screen of
        # the page, and before the result and the downloads.
        assert 0 <= rounds["y"] - (status["y"] + status["height"]) < PHONE["height"] / 8
        assert rounds["y"] < PHONE["height"]
        assert final["y"] >= rounds["y"] + rounds["height"]
        assert rounds["width"] >= PHONE["width"] * 0.75
        assert requests.offsite == []
    finally:
        context.close()


def test_the_api_panel_shows_the_pages_own_example(browser: Any, demo_url: str):
    context, page, requests = open_page(browser, demo_url)
    try:
        page.get_by_text("Use via API").click()
        snippet = page.locator("code", has_text="client.predict(").first
        snippet.wait_for()
        text = snippet.inner_text()
        assert "image_path=handle_file('coffee.jpg')" in text
        assert 'query="the cup"' in text and 'api_name="/run"' in text
        assert page.locator("code", has_text="sample_file.pdf").count() == 0
        assert requests.offsite == []
    finally:
        context.close()


def test_the_tool_set_picked_on_the_page_is_the_one_the_session_uses(
    browser: Any, demo_url: str, server: ScriptedServer
):
    context, page, requests = open_page(browser, demo_url)
    try:
        tools = page.locator("#s3a-tools")
        assert tools.get_by_label("paper").is_checked()  # the demo's --tools (its default)
        tools.get_by_label("extended").check()
        page.locator("#s3a-image input[type=file]").set_input_files(str(COFFEE))
        page.locator("#s3a-status .s3a-status", has_text="Image ready").wait_for()
        page.locator("#s3a-query textarea").fill(QUERY)
        page.locator("#s3a-run").click()
        page.locator("#s3a-status .s3a-status-done").wait_for()
        assert tools.get_by_label("extended").is_checked()
        first = server.completions[0].body["messages"]
        assert "`unlike`" in json.dumps(first[0]["content"])  # the extended set's system prompt
        assert requests.offsite == []
    finally:
        context.close()
