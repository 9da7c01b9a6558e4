"""The video tab of the Gradio page: upload a clip, query, run, watch the rounds, stop, play
the overlay, download.

Imports ``gradio``; import this module only when the demo is served. Element ids start with
``s3a-video-`` (the browser test finds the controls by them); the API names are ``run_video``
and ``stop_video``, beside the image tab's ``run`` and ``stop``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import gradio as gr

from sam3_agent.apps.demo.page import (
    api_example,
    downloads_box,
    run_and_stop_buttons,
    session_key,
    session_outputs,
    upload_example,
    wire_run_and_stop,
)
from sam3_agent.apps.demo.video import (
    VideoDemoRunner,
    VideoUpdate,
    check_stride,
    check_upload,
    describe_upload,
)
from sam3_agent.apps.demo.views import EMPTY_ROUNDS, status_html, video_summary
from sam3_agent.values.errors import UserError
from sam3_agent.values.text import one_line

TITLE = "sam3-agent"
VIDEO_READY = "Upload a video clip, say what to segment and track, press Run."
API_EXAMPLE = ("clip.mp4", "the dog that enters last")
"""The ``/run_video`` call the page's "Use via API" panel shows: a video file and a query."""

VIDEO_CSS = """
#s3a-video-rounds .s3a-rounds { display: flex; flex-direction: column; gap: 0.6rem; }
#s3a-video-rounds .s3a-empty { color: var(--body-text-color-subdued); padding: 1rem 0; }
@media (max-width: 767px) {
  #s3a-video-main { flex-direction: column; flex-wrap: nowrap; }
  #s3a-video-left { display: contents; }
  #s3a-video-form { order: 0; }
  #s3a-video-right { order: 1; }
  #s3a-video-after { order: 2; }
}
"""
"""The video tab's rules beside the image page's ``CSS`` (its own element ids)."""


def _outputs(update: VideoUpdate) -> tuple[Any, ...]:
    """The values of (rounds, status, final video, downloads) for ``update``."""

    def ended(rounds: str, files: list[str] | None) -> tuple[Any, ...]:
        result = update.result
        if update.state != "done" or result is None:
            kind = "stopped" if update.state == "stopped" else "error"
            return rounds, status_html(kind, update.message), None, files
        kind = "done" if result.status != "failed" else "error"
        message = video_summary(result)
        if update.web_video is None:
            message += " (the overlay could not be prepared for the page: download overlay.mp4)"
        shown = None if update.web_video is None else str(update.web_video)
        return rounds, status_html(kind, message), shown, files

    return session_outputs(update, ended)


def build_video_page(runner: VideoDemoRunner, *, concurrency: int) -> gr.Blocks:
    """The video tab's :class:`gradio.Blocks`; its requests share the concurrency bound of
    the image tab's (``concurrency_id="agent"``)."""

    def preview(video_path: str | None, stride: float | None) -> str:
        if video_path is None:
            return status_html("idle", VIDEO_READY)
        try:
            video = check_upload(video_path, check_stride(stride), runner.limits)
        except UserError as e:  # the upload refused (a VideoLoadError), or the stride
            return status_html("error", one_line(e))
        return status_html("idle", f"Video ready: {describe_upload(video)}. Press Run.")

    async def run(
        video_path: str | None, query: str, stride: float | None, request: gr.Request
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Segment and track what the query describes through the video; streams (rounds,
        status, overlay video, downloads) once when it starts, after each round and at the
        end. /stop_video ends it.

        Args:
            video_path: the video file, e.g. handle_file("clip.mp4").
            query: what to segment and track, in words.
            stride: track every n-th frame (1: every frame).
        """
        async for update in runner.run(session_key(request), video_path, query, stride):
            yield _outputs(update)

    with gr.Blocks(title=TITLE, analytics_enabled=False) as page:
        gr.Markdown(
            "SAM 3 follows every instance of a phrase through the clip as a **track**; the "
            "model compares the tracks and keeps the ones the request describes."
        )
        # As on the image tab: wide, the form and result left and the rounds right; narrow
        # (VIDEO_CSS), the form and status, then the rounds, then the result and downloads.
        with gr.Row(equal_height=False, elem_id="s3a-video-main"):
            with gr.Column(scale=5, elem_id="s3a-video-left"):
                with gr.Column(elem_id="s3a-video-form"):
                    video_file = gr.File(
                        label="Video", file_types=["video"], type="filepath", elem_id="s3a-video"
                    )
                    query = gr.Textbox(
                        label="What to segment and track",
                        placeholder="e.g. the dog that enters last",
                        elem_id="s3a-video-query",
                    )
                    stride = gr.Number(
                        label="Track every n-th frame",
                        value=1,
                        minimum=1,
                        precision=0,
                        elem_id="s3a-video-stride",
                    )
                    run_button, stop_button = run_and_stop_buttons("s3a-video")
                    status = gr.HTML(
                        status_html("idle", VIDEO_READY), label="Status", elem_id="s3a-video-status"
                    )
                with gr.Column(elem_id="s3a-video-after"):
                    final = gr.Video(
                        label="Result", interactive=False, autoplay=True, elem_id="s3a-video-final"
                    )
                    downloads = downloads_box("s3a-video-files")
            with gr.Column(scale=6, elem_id="s3a-video-right"):
                rounds = gr.HTML(EMPTY_ROUNDS, label="Rounds", elem_id="s3a-video-rounds")

        for change in (video_file.change, stride.change):
            change(preview, [video_file, stride], [status], api_visibility="private")
        name, text = API_EXAMPLE
        upload_example(video_file, name)
        api_example(query, text, text)
        # Run and Enter in the query box are off while a session runs, as on the image tab.
        wire_run_and_stop(
            run_button=run_button,
            stop_button=stop_button,
            query=query,
            run=run,
            inputs=[video_file, query, stride],
            outputs=[rounds, status, final, downloads],
            stop=runner.stop,
            api_names=("run_video", "stop_video"),
            concurrency=concurrency,
        )
    return page


def with_video_tab(image_page: gr.Blocks, video_page: gr.Blocks) -> gr.Blocks:
    """One page with the image demo in its first tab and the video demo in its second."""
    with gr.Blocks(title=TITLE, analytics_enabled=False) as page, gr.Tabs():
        with gr.Tab("Image", id="image", elem_id="s3a-tab-image"):
            image_page.render()
        with gr.Tab("Video", id="video", elem_id="s3a-tab-video"):
            video_page.render()
    return page
