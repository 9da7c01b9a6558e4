"""The demo's web app: the Gradio page in a FastAPI app, optionally beside the SAM 3 service;
offline-safe (no analytics, share link, font CDN or server-side rendering)."""

from __future__ import annotations

import hmac
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sam3_agent.apps.demo.sessions import DemoRunner, VideoDemoRunner
from sam3_agent.apps.demo.views import page_css
from sam3_agent.backends.base import Segmenter
from sam3_agent.values.errors import UserError

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parents[3] / "assets"
EXAMPLE_QUERIES = {"astronaut.jpg": "the flag on her sleeve", "coffee.jpg": "the cup"}


def bundled_examples(directory: Path = ASSETS) -> list[tuple[Path, str]]:
    """Example (image, query) pairs from a source checkout's ``assets/``."""
    return [
        (directory / name, query)
        for name, query in EXAMPLE_QUERIES.items()
        if (directory / name).is_file()
    ]


_API_INFO = re.compile(rb"window\.gradio_api_info = .*?;</script>", re.DOTALL)
_LOGIN_PAGE = b'"auth_required":true'


class NoApiBeforeLogin:
    """ASGI middleware: the login page goes out without the API description Gradio embeds
    (``window.gradio_api_info``) before login too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] != "/":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body = bytearray()

        async def reply(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers", [])).get(b"content-type", b"")
                if kind.startswith(b"text/html"):
                    start = message  # held until the whole page is read
                    return
            elif message["type"] == "http.response.body" and start is not None:
                body.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                page = bytes(body)
                if _LOGIN_PAGE in page:
                    page = _API_INFO.sub(b"window.gradio_api_info = null;</script>", page)
                headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                headers.append((b"content-length", str(len(page)).encode()))
                await send({**start, "headers": headers})
                await send({"type": "http.response.body", "body": page})
                return
            await send(message)

        await self.app(scope, receive, reply)


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
    """The page at ``/`` (with ``service_segmenter`` also the SAM 3 service); ``token``: the
    login password and the service's bearer token."""
    if token is not None and not token:
        raise UserError("the demo token must not be empty")
    if concurrency < 1 or max_queue < 1:
        raise UserError("the demo's concurrency and queue size must be >= 1")
    # Read by gradio at import: no usage reports, no version check.
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    import gradio as gr
    from fastapi import FastAPI

    from sam3_agent.apps.demo.page import build_page

    for each in (runner, video_runner):
        if each is not None:
            each.runs_dir.mkdir(parents=True, exist_ok=True)
    page = build_page(runner, concurrency=concurrency, examples=examples, video_runner=video_runner)
    page.queue(max_size=max_queue, default_concurrency_limit=concurrency)
    if service_segmenter is not None:
        from sam3_agent.apps.service.app import create_app as create_service_app

        app = create_service_app(service_segmenter, token=token)
    else:
        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    if token:
        app.add_middleware(NoApiBeforeLogin)
    # Routes registered before the mount (the service's) take precedence over the page.
    return gr.mount_gradio_app(
        app,
        page,
        path="/",
        # Any user name, the token as the password.
        auth=(lambda _, password: hmac.compare_digest(password.encode(), token.encode()))
        if token
        else None,
        auth_message="Enter any user name and the demo's token as the password.",
        # Never the runs directory (--out), which would serve every run's files: Gradio
        # serves its own copy of each file the page offers.
        allowed_paths=[str(p.parent.resolve()) for p, _ in examples],
        footer_links=["api"],
        ssr_mode=False,
        pwa=False,
        mcp_server=False,
        enable_monitoring=False,
        show_error=False,
        # Gradio's default look with its bundled fonts only (nothing from a font CDN).
        theme=gr.themes.Default(
            font=[gr.themes.LocalFont("IBM Plex Sans"), "ui-sans-serif", "system-ui", "sans-serif"],
            font_mono=[gr.themes.LocalFont("IBM Plex Mono"), "ui-monospace", "monospace"],
        ),
        css=page_css(video_runner is not None),
    )


def serve(app: FastAPI, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve ``app`` until interrupted."""
    from sam3_agent.apps.service.server import run_app

    logger.info("sam3-agent demo on http://%s:%d", host, port)
    run_app(app, host=host, port=port, log_level=log_level)
