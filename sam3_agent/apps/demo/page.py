"""The Gradio page: upload, query, run, watch the rounds, stop, download.

Imports ``gradio``; import this module only when the demo is served. Element ids start with
``s3a-`` (the browser test finds the controls by them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import gradio as gr

from sam3_agent.apps.demo.sessions import (
    DemoRunner,
    Update,
    final_annotations,
    load_display_image,
    upload_error,
)
from sam3_agent.apps.demo.views import EMPTY_ROUNDS, result_summary, rounds_html, status_html
from sam3_agent.values.errors import ImageLoadError

if TYPE_CHECKING:
    from sam3_agent.agent.events import RoundEvent

TITLE = "sam3-agent"
READY = "Upload an image, say what to segment, press Run."
API_EXAMPLE = ("coffee.jpg", "the cup")
"""The ``/run`` call the page's "Use via API" panel shows: an image file and a query."""

CSS = """
#s3a-rounds .s3a-rounds { display: flex; flex-direction: column; gap: 0.6rem; }
#s3a-rounds .s3a-empty { color: var(--body-text-color-subdued); padding: 1rem 0; }
.s3a-round { border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 0.4rem 0.8rem; }
.s3a-round summary { font-weight: 600; cursor: pointer; }
.s3a-correction summary { color: var(--color-accent); }
.s3a-reasoning { font-style: italic; white-space: pre-wrap; margin: 0.4rem 0;
  color: var(--body-text-color-subdued); }
.s3a-observation { white-space: pre-wrap; margin: 0.4rem 0; }
.s3a-masks { max-width: 100%; height: auto; border-radius: 4px; }
.s3a-checks { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr));
  gap: 0.5rem; margin: 0.4rem 0; }
.s3a-check { margin: 0; border-radius: 6px; padding: 0.3rem; }
.s3a-check img { max-width: 100%; height: auto; }
.s3a-check figcaption { font-size: 0.85em; display: flex; flex-direction: column; }
.s3a-check-reply { white-space: pre-wrap; max-height: 6em; overflow: auto; }
.s3a-accept { border: 2px solid #2e9e4f; }
.s3a-reject { border: 2px solid #c9372c; }
.s3a-status { padding: 0.5rem 0.8rem; border-radius: 6px;
  background: var(--background-fill-secondary); }
.s3a-status-error { background: #fdecea; color: #8a1c13; }
.s3a-status-done { background: #e7f6ec; color: #1d5e31; }
.s3a-status-stopped { background: #fff4e0; color: #7a4b00; }
/* Narrow screens: the rounds right under the status line, the result and downloads after. */
@media (max-width: 767px) {
  #s3a-main { flex-direction: column; flex-wrap: nowrap; }
  #s3a-left { display: contents; }
  #s3a-form { order: 0; }
  #s3a-right { order: 1; }
  #s3a-after { order: 2; }
}
"""


def api_example(component: gr.components.Component, payload: Any, value: Any) -> None:
    """Make ``payload`` (and ``value``) the example the "Use via API" panel shows for
    ``component``, instead of Gradio's generic one (a PDF on the internet for a file).

    Set on the instance: a subclass of a Gradio component would make Gradio write a ``.pyi``
    stub beside this module.
    """
    component.example_payload = lambda: payload  # type: ignore[method-assign]
    component.example_value = lambda: value  # type: ignore[method-assign]


def theme() -> gr.themes.Base:
    """Gradio's default look with its bundled fonts only (nothing fetched from a font CDN)."""
    return gr.themes.Default(
        font=[gr.themes.LocalFont("IBM Plex Sans"), "ui-sans-serif", "system-ui", "sans-serif"],
        font_mono=[gr.themes.LocalFont("IBM Plex Mono"), "ui-monospace", "monospace"],
    )


def session_key(request: gr.Request | None) -> str:
    """Whose session a request belongs to: every browser tab (and every gradio_client) has
    its own session hash."""
    return (request.session_hash if request is not None else None) or "anonymous"


class Shown(Protocol):
    """What a tab shows of one request (an image or a video :class:`Update`)."""

    @property
    def state(self) -> str: ...
    @property
    def rounds(self) -> tuple[RoundEvent, ...]: ...
    @property
    def message(self) -> str: ...
    @property
    def files(self) -> tuple[Path, ...]: ...
    @property
    def output_dir(self) -> Path | None: ...


Ended = Callable[[str, list[str] | None], tuple[Any, ...]]
"""A tab's (rounds, status, result, downloads) once its request ended, from the rounds'
HTML and the downloads."""


def session_outputs(update: Shown, ended: Ended) -> tuple[Any, ...]:
    """The values of (rounds, status, result, downloads) for ``update``: alike on every tab
    while a request is refused or running; ``ended`` once it ended."""
    if update.state == "error" and update.output_dir is None:
        # Refused before it started: what the page shows (a running session's rounds, too)
        # stays; the status line says why.
        return gr.skip(), status_html("error", update.message), gr.skip(), gr.skip()
    rounds = rounds_html(update.rounds)
    if update.state == "running":
        return rounds, status_html("running", update.message), gr.skip(), None
    return ended(rounds, [str(f) for f in update.files] or None)


def _outputs(update: Update, image_path: str | None, max_pixels: int) -> tuple[Any, ...]:
    """The values of (rounds, status, final image, downloads) for ``update``."""

    def ended(rounds: str, files: list[str] | None) -> tuple[Any, ...]:
        if update.state == "error":
            return rounds, status_html("error", update.message), gr.skip(), files
        if update.state == "stopped":
            return rounds, status_html("stopped", update.message), gr.skip(), files
        result = update.result
        if result is None or image_path is None:  # not reachable: done always has a result
            message = "the session ended without a result"
            return rounds, status_html("error", message), None, files
        shown = final_annotations(image_path, result, max_pixels=max_pixels)
        kind = "done" if result.status != "failed" else "error"
        annotated = (shown.image, shown.masks)
        return rounds, status_html(kind, result_summary(result)), annotated, files

    return session_outputs(update, ended)


def stopper(stop: Callable[[str], bool]) -> Callable[[gr.Request], str]:
    """The Stop button's (and the API's) handler for a runner's ``stop``."""

    def answer(request: gr.Request) -> str:
        # The running request's own stream shows "stopped" on the page; this answer is for
        # API callers only, so the two never race for the status line.
        return "stopping" if stop(session_key(request)) else "nothing is running"

    return answer


def upload_example(file: gr.File, name: str) -> None:
    """Make a file named ``name`` the example of ``file`` in the "Use via API" panel."""
    # What gradio_client.handle_file(name) sends; with "url" the panel's Python example
    # reads handle_file('coffee.jpg').
    upload: dict[str, Any] = {"path": name, "url": name, "orig_name": name}
    upload["meta"] = {"_type": "gradio.FileData"}
    api_example(file, upload, name)


def run_and_stop_buttons(prefix: str) -> tuple[gr.Button, gr.Button]:
    """The Run and Stop buttons, side by side (element ids ``{prefix}-run``, ``-stop``)."""
    with gr.Row():
        run_button = gr.Button("Run", variant="primary", elem_id=f"{prefix}-run")
        stop_button = gr.Button("Stop", variant="stop", elem_id=f"{prefix}-stop")
    return run_button, stop_button


def downloads_box(elem_id: str) -> gr.File:
    """Where a request's files are offered for download."""
    return gr.File(label="Downloads", file_count="multiple", interactive=False, elem_id=elem_id)


def wire_run_and_stop(
    *,
    run_button: gr.Button,
    stop_button: gr.Button,
    query: gr.Textbox,
    run: Callable[..., AsyncIterator[tuple[Any, ...]]],
    inputs: Sequence[gr.components.Component],
    outputs: Sequence[gr.components.Component],
    stop: Callable[[str], bool],
    api_names: tuple[str, str],
    concurrency: int,
) -> None:
    """Run (the button, or Enter in the query box) streams ``run`` into ``outputs``; Stop
    ends it through the runner's ``stop``. ``api_names``: the two as API endpoints. Every
    tab's requests share one concurrency bound (``concurrency_id="agent"``)."""
    # Run and Enter in the query box are off while a session runs, so a second press can
    # neither start another request nor clear the rounds; they come back however it ended.
    busy = [run_button, query]
    gr.on(
        [run_button.click, query.submit],
        lambda: (gr.Button(interactive=False), gr.Textbox(interactive=False)),
        None,
        busy,
        queue=False,
        trigger_mode="once",
        api_visibility="private",
        show_progress="hidden",
    ).then(
        run,
        list(inputs),
        list(outputs),
        api_name=api_names[0],
        concurrency_limit=concurrency,
        concurrency_id="agent",
        show_progress="minimal",
    ).then(
        lambda: (gr.Button(interactive=True), gr.Textbox(interactive=True)),
        None,
        busy,
        queue=False,
        api_visibility="private",
        show_progress="hidden",
    )
    # Outside the queue: a stop must not wait behind the requests it is meant to end.
    stop_answer = gr.Textbox(label="Answer", visible=False)
    stop_button.click(stopper(stop), None, [stop_answer], api_name=api_names[1], queue=False)


def build_page(
    runner: DemoRunner,
    *,
    concurrency: int,
    examples: Sequence[tuple[Path, str]] = (),
) -> gr.Blocks:
    """The demo's :class:`gradio.Blocks`; ``concurrency`` bounds requests running at once."""

    def preview(image_path: str | None) -> tuple[Any, str]:
        if image_path is None:
            return None, status_html("idle", READY)
        try:
            image = load_display_image(image_path, max_pixels=runner.max_pixels)
        except ImageLoadError as e:
            return None, status_html("error", upload_error(image_path, e))
        return (image, []), status_html("idle", "Image ready. Say what to segment and press Run.")

    async def run(
        image_path: str | None, query: str, request: gr.Request
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Segment what the query describes; streams (rounds, status, result, downloads)
        once when it starts, after each round and at the end. /stop ends it.

        Args:
            image_path: the image file, e.g. handle_file("coffee.jpg").
            query: what to segment, in words.
        """
        async for update in runner.run(session_key(request), image_path, query):
            yield _outputs(update, image_path, runner.max_pixels)

    with gr.Blocks(title=TITLE, analytics_enabled=False) as page:
        gr.Markdown(
            "## sam3-agent: watch a multimodal LLM segment with SAM 3\n"
            "Each round shows the model's reasoning, its tool call, the masks SAM 3 returned "
            "and the verdicts of the mask checks."
        )
        # Wide: the form, status, result and downloads on the left, the rounds on the right.
        # Narrow (CSS): the form and status, then the rounds, then the result and downloads.
        with gr.Row(equal_height=False, elem_id="s3a-main"):
            with gr.Column(scale=5, elem_id="s3a-left"):
                with gr.Column(elem_id="s3a-form"):
                    image_file = gr.File(
                        label="Image", file_types=["image"], type="filepath", elem_id="s3a-image"
                    )
                    query = gr.Textbox(
                        label="What to segment",
                        placeholder="e.g. the leftmost child wearing a blue vest",
                        elem_id="s3a-query",
                    )
                    run_button, stop_button = run_and_stop_buttons("s3a")
                    status = gr.HTML(
                        status_html("idle", READY), label="Status", elem_id="s3a-status"
                    )
                with gr.Column(elem_id="s3a-after"):
                    final = gr.AnnotatedImage(label="Result", elem_id="s3a-final")
                    downloads = downloads_box("s3a-files")
                    if examples:
                        gr.Examples(
                            examples=[[str(path), text] for path, text in examples],
                            inputs=[image_file, query],
                            cache_examples=False,
                        )
            with gr.Column(scale=6, elem_id="s3a-right"):
                rounds = gr.HTML(EMPTY_ROUNDS, label="Rounds", elem_id="s3a-rounds")

        image_file.change(
            preview, [image_file], [final, status], api_visibility="private", queue=False
        )
        name, text = API_EXAMPLE
        upload_example(image_file, name)
        api_example(query, text, text)
        wire_run_and_stop(
            run_button=run_button,
            stop_button=stop_button,
            query=query,
            run=run,
            inputs=[image_file, query],
            outputs=[rounds, status, final, downloads],
            stop=runner.stop,
            api_names=("run", "stop"),
            concurrency=concurrency,
        )
    return page
