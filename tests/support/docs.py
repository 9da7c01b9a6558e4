"""The project's documentation as the tests read it: the README, the front door, and the
reference pages under ``docs/`` that it links to."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def documentation_pages() -> list[Path]:
    """The README first, then every ``docs/*.md`` page in name order."""
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def documentation_text() -> str:
    """Every page of :func:`documentation_pages`, joined by blank lines."""
    return "\n\n".join(page.read_text(encoding="utf-8") for page in documentation_pages())
