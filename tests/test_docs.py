"""The README is a front door and the reference lives in docs/: the README stays short,
every link between the pages lands on a file and heading that exist, and every flag of every
command is documented on some page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sam3_agent.apps.cli.main import COMMANDS
from tests.support.docs import README, documentation_pages, documentation_text

README_MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code, where ``](`` is not a link."""
    text = re.sub(r"(?ms)^```.*?^```", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``: lower case, punctuation dropped,
    spaces as hyphens."""
    headings = re.findall(r"(?m)^#+ (.+)$", _prose(page.read_text(encoding="utf-8")))
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _lands(page: Path, link: str) -> bool:
    path, _, anchor = link.partition("#")
    target = (page.parent / path).resolve() if path else page
    if not target.exists():
        return False
    return not anchor or target.suffix != ".md" or anchor in _anchors(target)


def _local_links(page: Path) -> list[str]:
    links = LINK.findall(_prose(page.read_text(encoding="utf-8")))
    return [link for link in links if not re.match(r"[a-z]+:", link)]


def test_the_readme_is_a_front_door_of_at_most_250_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


def test_the_readme_links_every_reference_page() -> None:
    linked = {link.split("#", 1)[0] for link in _local_links(README)}
    pages = {f"docs/{page.name}" for page in documentation_pages()[1:]}
    assert pages and pages <= linked


@pytest.mark.parametrize("page", documentation_pages(), ids=lambda p: p.name)
def test_every_local_link_lands_on_a_file_and_heading_that_exist(page: Path) -> None:
    links = _local_links(page)
    broken = [link for link in links if not _lands(page, link)]
    assert not broken, f"{page.name}: {broken}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_in_the_readme_and_every_flag_of_it_documented(name: str) -> None:
    readme = README.read_text(encoding="utf-8")
    docs = documentation_text()
    command = COMMANDS[name].load(name)
    flags = [
        flag
        for param in command.params
        for flag in (*param.opts, *param.secondary_opts)
        if flag.startswith("--")
    ]
    undocumented = [f for f in flags if not re.search(re.escape(f) + r"(?![\w-])", docs)]
    assert f"`{name}" in readme
    assert flags and not undocumented, f"{name}: {undocumented}"
