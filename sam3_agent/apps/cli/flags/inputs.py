"""``--max-download-mb``: how much an input named by an http(s) URL may be (``run``, ``track``,
``batch``)."""

from __future__ import annotations

from typing import Any

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.media.fetch import DEFAULT_MAX_DOWNLOAD_MB
from sam3_agent.values.errors import UserError

MAX_DOWNLOAD_MB = flag(
    "max_download_mb", int, DEFAULT_MAX_DOWNLOAD_MB, "--max-download-mb", metavar="MB",
    panel="Input", help="Largest download of an image or video given as an http(s) URL.",
)  # fmt: skip


def _max_download_mb(values: dict[str, Any], built: dict[str, Any]) -> int:
    value = int(values["max_download_mb"])
    if value < 1:
        raise UserError(f"--max-download-mb must be >= 1, got {value}")
    return value


DOWNLOADS = FlagGroup("max_download_mb", (MAX_DOWNLOAD_MB,), _max_download_mb)
