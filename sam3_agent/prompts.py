"""Prompt files under ``sam3_agent/prompts/``, rendered with a strict Jinja environment.

A variable a template uses but the caller did not pass is an error, not an empty string.
Rendering is deterministic: the same arguments give byte-identical text in any process.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("sam3_agent", "prompts"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
    trim_blocks=False,
)


def render(template: str, **variables: Any) -> str:
    """Render ``prompts/<template>.j2``; raises ``jinja2.UndefinedError`` on a missing variable."""
    return _ENV.get_template(f"{template}.j2").render(**variables).strip()


@cache
def _feedback_module() -> Any:
    return _ENV.get_template("feedback.j2").module


def feedback(message: str, /, **variables: Any) -> str:
    """One of the tool-result and corrective messages (macros in ``prompts/feedback.j2``)."""
    macro = getattr(_feedback_module(), message, None)
    if macro is None:
        raise KeyError(f"no feedback message named {message!r} in prompts/feedback.j2")
    missing = [a for a in macro.arguments if a not in variables]
    if missing:
        raise jinja2.UndefinedError(f"feedback {message!r} is missing variables {missing}")
    return str(macro(**variables)).strip()
