"""The demo's web app: the Gradio page mounted in a FastAPI app, optionally beside the SAM 3
service's API (``/health``, ``/v1/*``) on the same segmenter, and the uvicorn runner.

Offline-safe by construction: Gradio's analytics are off, no share link is made, the theme
uses the fonts Gradio bundles, server-side rendering (which would need Node) is off, and the
page's images are inlined. The browser test fails on any request to a host other than the
server's own.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.apps.demo.sessions import DemoRunner
from sam3_agent.apps.demo.video import VideoDemoRunner
from sam3_agent.backends.base import Segmenter
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from fastapi import FastAPI

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parents[3] / "assets"
EXAMPLE_QUERIES = {"astronaut.jpg": "the flag on her sleeve", "coffee.jpg": "the cup"}


def bundled_examples(directory: Path = ASSETS) -> list[tuple[Path, str]]:
    """Example (image, query) pairs from the repository's ``assets/``, when it is there (a
    source checkout); an installed wheel has none."""
    return [
        (directory / name, query)
        for name, query in EXAMPLE_QUERIES.items()
        if (directory / name).is_file()
    ]


def _offline_gradio() -> None:
    # Read by gradio at import: no usage reports, no version check.
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"


def token_auth(token: str) -> Callable[[str, str], bool]:
    """Gradio's login check: any user name, the token as the password."""
    expected = token.encode()

    def check(username: str, password: str) -> bool:
        return hmac.compare_digest(password.encode(), expected)

    return check


def create_app(
    runner: DemoRunner,
    *,
    token: str | None = None,
    concurrency: int = 2,
    max_queue: int = 32,
    service_segmenter: Segmenter | None = None,
    examples: Sequence[tuple[Path, str]] = (),
    video_runner: VideoDemoRunner | None = None,
) -> FastAPI:
    """The demo app: the page at ``/``; with ``service_segmenter``, also the SAM 3 service.

    Args:
        runner: answers the page's requests (one agent per process).
        token: when set, the page asks for it at login (any user name) and the service's
            ``/v1/*`` endpoints require it as a bearer token.
        concurrency: requests that run at the same time; others wait in the queue.
        max_queue: requests that may wait; beyond that the page says the queue is full.
        service_segmenter: serve the SAM 3 service's API on this segmenter too.
        examples: (image path, query) pairs offered under the form.
        video_runner: answers a video tab beside the image one (its own runs directory;
            ``concurrency`` bounds both tabs' requests together).

    Raises:
        UserError: an empty token, or a bound below 1.
    """
    if token is not None and not token:
        raise UserError("the demo token must not be empty")
    if concurrency < 1 or max_queue < 1:
        raise UserError("the demo's concurrency and queue size must be >= 1")
    _offline_gradio()
    import gradio as gr
    from fastapi import FastAPI

    from sam3_agent.apps.demo.page import CSS, build_page, theme

    runner.runs_dir.mkdir(parents=True, exist_ok=True)
    page = build_page(runner, concurrency=concurrency, examples=examples)
    if video_runner is not None:
        from sam3_agent.apps.demo.video_page import build_video_page, with_video_tab

        video_runner.runs_dir.mkdir(parents=True, exist_ok=True)
        page = with_video_tab(page, build_video_page(video_runner, concurrency=concurrency))
    page.queue(max_size=max_queue, default_concurrency_limit=concurrency)
    if service_segmenter is not None:
        from sam3_agent.apps.service.app import create_app as create_service_app

        app = create_service_app(service_segmenter, token=token)
    else:
        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    # Routes registered before the mount (the service's) take precedence over the page.
    return gr.mount_gradio_app(
        app,
        page,
        path="/",
        auth=token_auth(token) if token else None,
        auth_message="Enter any user name and the demo's token as the password.",
        allowed_paths=[str(runner.runs_dir.resolve())]
        + [str(p.parent.resolve()) for p, _ in examples],
        footer_links=["api"],
        ssr_mode=False,
        pwa=False,
        mcp_server=False,
        enable_monitoring=False,
        show_error=False,
        theme=theme(),
        css=CSS,
    )


def serve(app: FastAPI, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve ``app`` until interrupted (blocks). One process: the models load once."""
    import uvicorn

    logger.info("sam3-agent demo on http://%s:%d", host, port)
    uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1)
