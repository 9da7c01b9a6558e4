"""The Gradio page: a tab per medium, built from the same blocks, with element ids starting
``s3a-`` (image) and ``s3a-video-`` (video). Imports ``gradio``: only when the demo serves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import gradio as gr

from sam3_agent.apps.demo.sessions import (
    DemoRunner,
    Update,
    VideoDemoRunner,
    check_stride,
    check_upload,
    describe_upload,
    final_annotations,
    load_display_image,
    upload_error,
)
from sam3_agent.apps.demo.views import (
    EMPTY_ROUNDS,
    result_summary,
    rounds_html,
    status_html,
    video_summary,
)
from sam3_agent.media.fetch import url_of
from sam3_agent.values.config import TOOL_SETS, ToolSet
from sam3_agent.values.errors import ImageLoadError, UserError
from sam3_agent.values.text import one_line

TITLE = "sam3-agent"


def api_example(component: gr.components.Component, payload: Any, value: Any) -> None:
    """Make ``payload`` (and ``value``) the example the "Use via API" panel shows for
    ``component``; set on the instance, as a subclass would make Gradio write a ``.pyi`` stub."""
    component.example_payload = lambda: payload  # type: ignore[method-assign,assignment]
    component.example_value = lambda: value  # type: ignore[method-assign,assignment]


def session_key(request: gr.Request | None) -> str:
    """Whose session a request belongs to: every browser tab has its own session hash."""
    return (request.session_hash if request is not None else None) or "anonymous"


Ended = Callable[[str, list[str] | None], tuple[Any, ...]]
"""A tab's outputs once its request ended, from the rounds' HTML and the downloads."""


def session_outputs(update: Update[Any], ended: Ended) -> tuple[Any, ...]:
    """(rounds, status, result, downloads) for ``update``; ``ended`` gives them at the end."""
    if update.state == "error" and update.output_dir is None:
        # Refused before it started: what the page shows stays; the status line says why.
        return gr.skip(), status_html("error", update.message), gr.skip(), gr.skip()
    rounds = rounds_html(update.rounds)
    if update.state == "running":
        return rounds, status_html("running", update.message), gr.skip(), None
    return ended(rounds, [str(f) for f in update.files] or None)


def uploads_only(upload: gr.File) -> gr.File:
    """``upload`` refusing an ``http(s)://`` path sent through the API, which Gradio would
    download on the client's behalf: the demo never fetches for a client."""
    moved, moved_async = (
        upload.move_resource_to_block_cache,
        upload.async_move_resource_to_block_cache,
    )

    def move(path: str | Path | None) -> str | None:
        _refuse_url(path)
        return moved(path)

    async def move_async(path: str | Path | None) -> str | None:
        _refuse_url(path)
        return await moved_async(path)

    upload.move_resource_to_block_cache = move  # type: ignore[method-assign,assignment]
    upload.async_move_resource_to_block_cache = move_async  # type: ignore[method-assign,assignment]
    return upload


def _refuse_url(path: str | Path | None) -> None:
    if path is not None and url_of(str(path)) is not None:
        raise gr.Error("the demo takes uploaded files, not URLs: download the file and upload it")


@dataclass(frozen=True)
class Tab:
    """What a tab's blocks are called and say (the upload's element id: ``s3a-`` and its
    label in lower case)."""

    prefix: str
    upload: str
    query: str
    placeholder: str
    ready: str
    api_example: tuple[str, str]
    api_names: tuple[str, str]


IMAGE_TAB = Tab(
    "s3a",
    "Image",
    "What to segment",
    "e.g. the leftmost child wearing a blue vest",
    "Upload an image, say what to segment, press Run.",
    ("coffee.jpg", "the cup"),
    ("run", "stop"),
)
VIDEO_TAB = Tab(
    "s3a-video",
    "Video",
    "What to segment and track",
    "e.g. the dog that enters last",
    "Upload a video clip, say what to segment and track, press Run.",
    ("clip.mp4", "the dog that enters last"),
    ("run_video", "stop_video"),
)


def build_tab(
    tab: Tab,
    *,
    options: Callable[[], list[gr.Number | gr.Radio]],
    final: Callable[[], gr.components.Component],
    preview: Callable[..., Any],
    preview_final: bool,
    run: Callable[..., AsyncIterator[tuple[Any, ...]]],
    stop: Callable[[str], bool],
    concurrency: int,
    examples: Sequence[tuple[Path, str]] = (),
) -> None:
    """A tab: the form, status, result and downloads left, the rounds right. A changed upload
    or option calls ``preview`` (with ``preview_final``: into the result box, outside the
    queue); Run streams ``run`` into the outputs, Stop calls ``stop``."""
    p = tab.prefix
    with gr.Row(equal_height=False, elem_id=f"{p}-main"):
        with gr.Column(scale=5, elem_id=f"{p}-left"):
            with gr.Column(elem_id=f"{p}-form"):
                upload = uploads_only(
                    gr.File(
                        label=tab.upload,
                        file_types=[tab.upload.lower()],
                        type="filepath",
                        elem_id=f"s3a-{tab.upload.lower()}",
                    )
                )
                query = gr.Textbox(
                    label=tab.query, placeholder=tab.placeholder, elem_id=f"{p}-query"
                )
                fields = options()
                with gr.Row():
                    run_button = gr.Button("Run", variant="primary", elem_id=f"{p}-run")
                    stop_button = gr.Button("Stop", variant="stop", elem_id=f"{p}-stop")
                status = gr.HTML(
                    status_html("idle", tab.ready), label="Status", elem_id=f"{p}-status"
                )
            with gr.Column(elem_id=f"{p}-after"):
                shown = final()
                downloads = gr.File(
                    label="Downloads",
                    file_count="multiple",
                    interactive=False,
                    elem_id=f"{p}-files",
                )
                if examples:
                    gr.Examples(
                        examples=[[str(path), text] for path, text in examples],
                        inputs=[upload, query],
                        cache_examples=False,
                    )
        with gr.Column(scale=6, elem_id=f"{p}-right"):
            rounds = gr.HTML(EMPTY_ROUNDS, label="Rounds", elem_id=f"{p}-rounds")

    for change in [upload.change, *(field.change for field in fields)]:
        change(
            preview,
            [upload, *fields],
            [shown, status] if preview_final else [status],
            api_visibility="private",
            queue=not preview_final,
        )
    name, text = tab.api_example
    # What gradio_client.handle_file(name) sends; with "url" the panel's Python example
    # reads handle_file('coffee.jpg').
    example: dict[str, Any] = {"path": name, "url": name, "orig_name": name}
    example["meta"] = {"_type": "gradio.FileData"}
    api_example(upload, example, name)
    api_example(query, text, text)
    # Run and Enter in the query box are off while a session runs, so a second press can
    # neither start another request nor clear the rounds; they come back however it ended.
    busy = [run_button, query]

    def enable(on: bool) -> Callable[[], tuple[gr.Button, gr.Textbox]]:
        return lambda: (gr.Button(interactive=on), gr.Textbox(interactive=on))

    quiet: dict[str, Any] = {"queue": False, "api_visibility": "private", "show_progress": "hidden"}
    gr.on(
        [run_button.click, query.submit],
        enable(False),
        None,
        busy,
        trigger_mode="once",
        **quiet,
    ).then(
        run,
        [upload, query, *fields],
        [rounds, status, shown, downloads],
        api_name=tab.api_names[0],
        concurrency_limit=concurrency,
        concurrency_id="agent",
        show_progress="minimal",
    ).then(enable(True), None, busy, **quiet)

    def answer(request: gr.Request) -> str:
        # For API callers only: the running request's own stream shows "stopped" on the page.
        return "stopping" if stop(session_key(request)) else "nothing is running"

    # Outside the queue: a stop must not wait behind the requests it is meant to end.
    stop_answer = gr.Textbox(label="Answer", visible=False)
    stop_button.click(answer, None, [stop_answer], api_name=tab.api_names[1], queue=False)


def image_tab(
    runner: DemoRunner, *, concurrency: int, examples: Sequence[tuple[Path, str]] = ()
) -> None:
    def preview(image_path: str | None, tool_set: str | None = None) -> tuple[Any, str]:
        if image_path is None:
            return None, status_html("idle", IMAGE_TAB.ready)
        try:
            image = load_display_image(image_path, max_pixels=runner.max_pixels)
        except ImageLoadError as e:
            return None, status_html("error", upload_error(image_path, e))
        return (image, []), status_html("idle", "Image ready. Say what to segment and press Run.")

    async def run(
        image_path: str | None, query: str, tool_set: ToolSet | None, request: gr.Request
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Segment what the query describes; streams (rounds, status, result, downloads)
        once when it starts, after each round and at the end. /stop ends it.

        Args:
            image_path: the image file, e.g. handle_file("coffee.jpg").
            query: what to segment, in words.
            tool_set: "paper" (the SAM 3 paper's tools) or "extended" (also visual
                exemplars and kept masks); the demo's --tools by default.
        """
        async for update in runner.run(session_key(request), image_path, query, tool_set):
            # A request without an image is refused: ``ended`` never sees it.
            yield session_outputs(update, partial(ended, update, cast(str, image_path)))

    def ended(
        update: Update[Any], image_path: str, rounds: str, files: list[str] | None
    ) -> tuple[Any, ...]:
        result = update.result
        if update.state != "done" or result is None:
            return rounds, status_html(update.state, update.message), gr.skip(), files
        shown = final_annotations(image_path, result, max_pixels=runner.max_pixels)
        kind = "done" if result.status != "failed" else "error"
        return rounds, status_html(kind, result_summary(result)), shown, files

    gr.Markdown(
        "## sam3-agent: watch a multimodal LLM segment with SAM 3\n"
        "Each round shows the model's reasoning, its tool call, the masks SAM 3 returned "
        "and the verdicts of the mask checks."
    )
    build_tab(
        IMAGE_TAB,
        options=lambda: [
            gr.Radio(
                choices=list(TOOL_SETS),
                value=runner.agent.config.tool_set,
                label="Tools",
                info="paper: the SAM 3 paper's tools; extended: also visual exemplars and "
                "kept masks (docs/tools.md)",
                elem_id="s3a-tools",
            )
        ],
        final=lambda: gr.AnnotatedImage(label="Result", elem_id="s3a-final"),
        preview=preview,
        preview_final=True,
        run=run,
        stop=runner.stop,
        concurrency=concurrency,
        examples=examples,
    )


def video_tab(runner: VideoDemoRunner, *, concurrency: int) -> None:
    def preview(video_path: str | None, stride: float | None) -> str:
        if video_path is None:
            return status_html("idle", VIDEO_TAB.ready)
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
            yield session_outputs(update, partial(ended, update))

    def ended(update: Update[Any], rounds: str, files: list[str] | None) -> tuple[Any, ...]:
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

    gr.Markdown(
        "SAM 3 follows every instance of a phrase through the clip as a **track**; the "
        "model compares the tracks and keeps the ones the request describes."
    )
    build_tab(
        VIDEO_TAB,
        options=lambda: [
            gr.Number(
                label="Track every n-th frame",
                value=1,
                minimum=1,
                precision=0,
                elem_id="s3a-video-stride",
            )
        ],
        final=lambda: gr.Video(
            label="Result", interactive=False, autoplay=True, elem_id="s3a-video-final"
        ),
        preview=preview,
        preview_final=False,
        run=run,
        stop=runner.stop,
        concurrency=concurrency,
    )


def build_page(
    runner: DemoRunner,
    *,
    concurrency: int,
    examples: Sequence[tuple[Path, str]] = (),
    video_runner: VideoDemoRunner | None = None,
) -> gr.Blocks:
    """The image tab alone, or with ``video_runner`` an Image and a Video tab; ``concurrency``
    bounds the requests running at once, both tabs' together."""
    with gr.Blocks(title=TITLE, analytics_enabled=False) as page:
        if video_runner is None:
            image_tab(runner, concurrency=concurrency, examples=examples)
        else:
            with gr.Tabs():
                with gr.Tab("Image", id="image", elem_id="s3a-tab-image"):
                    image_tab(runner, concurrency=concurrency, examples=examples)
                with gr.Tab("Video", id="video", elem_id="s3a-tab-video"):
                    video_tab(video_runner, concurrency=concurrency)
    return page
