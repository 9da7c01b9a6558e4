"""What the demo's browser tests share: Debian's chromium driven by Playwright, offline.

Importing this module skips the importing test module when the demo extra, Playwright or
chromium is missing (with the reason).
"""

from __future__ import annotations

import shutil
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("gradio", reason="the demo extra is not installed (pip install .[demo])")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install .[demo])"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True
    )

# The closed network refuses connections; these keep chromium from trying its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 60_000  # bounds a hung test; every wait is on a state of the page


class OffsiteRequests:
    """Records every request the page makes to a host other than the demo server's, and the
    requests it queues (``joins``: one per request the page sent to the agent)."""

    def __init__(self, page: Any, url: str) -> None:
        self.allowed = urlsplit(url).netloc
        self.offsite: list[str] = []
        self.joins = 0
        page.on("request", self._seen)

    def _seen(self, request: Any) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in ("data", "blob"):
            return
        if parts.netloc != self.allowed:
            self.offsite.append(request.url)
        elif parts.path.endswith("/queue/join"):
            self.joins += 1
