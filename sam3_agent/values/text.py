"""Text from outside (a model, a file, a user) made safe to show, and quoted back bounded:
a correction echoing a megabyte reply stays a few hundred characters."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable

from sam3_agent.values.errors import UserError

_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def visible(text: str, limit: int | None = None) -> str:
    """``text`` with control, bidi-override and lone-surrogate characters shown as ``\\xNN``
    (so it cannot restyle a terminal, move its cursor, hide lines or fail to encode), cut at
    ``limit`` characters when given."""
    text = _INVISIBLE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if limit is not None and len(text) > limit:
        return text[:limit] + f"… (+{len(text) - limit} chars)"
    return text


ECHO_LIMIT = 200  # characters of one echoed value kept before it is cut
ECHO_LIST_LIMIT = 1000  # characters of a whole echoed list kept before later items are left out


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``value`` (a string as is, else JSON or ``repr``) cut to about ``limit`` characters."""
    text = value if isinstance(value, str) else _as_json(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def echo_list(
    values: Iterable[object], limit: int = ECHO_LIST_LIMIT, *, item_limit: int = ECHO_LIMIT
) -> list[str]:
    """Each value through :func:`echo`, items kept until ``limit`` characters in all; a last
    item says how many were left out."""
    items = [echo(v, item_limit) for v in values]
    kept: list[str] = []
    used = 0
    for item in items:
        if used + len(item) > limit and kept:
            kept.append(f"... and {len(items) - len(kept)} more")
            break
        kept.append(item)
        used += len(item)
    return kept


ONE_LINE_LIMIT = 500  # characters of a one-line message kept before it is cut


def one_line(value: BaseException | str, limit: int = ONE_LINE_LIMIT) -> str:
    """``value`` as one bounded, terminal-safe line; an exception as ``TypeName: message``, a
    UserError (worded for the user) as its message alone."""
    if isinstance(value, BaseException):
        try:
            text = str(value)
        except Exception:  # a __str__ that raises still gives a line
            text = "(the error's message cannot be shown)"
    else:
        text = value
    text = visible(" ".join(text.split()))
    if isinstance(value, BaseException) and not isinstance(value, UserError):
        name = type(value).__name__
        text = f"{name}: {text}" if text else name
    if len(text) > limit:
        text = text[: max(0, limit - 3)] + "..."
    return text


def changed(name: str, was: object, now: object) -> str:
    """One setting that differs, for a refusal: ``temperature was 0.0, now 0.7``."""
    return f"{name} was {_shown(was)}, now {_shown(now)}"


def _shown(value: object) -> str:
    if value is None:
        return "not given"
    return repr(value) if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _as_json(value: object) -> str:
    with contextlib.suppress(TypeError, ValueError, RecursionError):
        return json.dumps(value)
    try:
        return repr(value)
    except (ValueError, RecursionError):
        return f"<a {type(value).__name__} too large to show>"
