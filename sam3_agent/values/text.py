"""Text from outside (a model, a file, a user) made safe to show, and quoted back bounded.

:func:`visible` is for every surface that shows such text to a person (the terminal, HTML
after escaping): control, bidi-override and lone-surrogate characters appear as ``\\xNN``
instead of acting.

A corrective message often repeats what the model wrote (a phrase, a tool name, a value a
parameter refused). The model can write anything, a megabyte of text included, so every
such echo goes through :func:`echo` or :func:`echo_list`: a correction stays a few hundred
characters however long the input was, and the next context does not grow with it.

An error that ends a run, or a failure a library or server reported, reaches a person as one
line made by :func:`one_line`: bounded, plain, and writable to any terminal or file. A
setting that differs from what a run started with reads as :func:`changed` says.
"""

from __future__ import annotations

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


ECHO_LIMIT = 200
"""Characters of one echoed value kept before it is cut."""
ECHO_LIST_LIMIT = 1000
"""Characters of a whole echoed list kept before later items are left out."""


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``value`` as text for a corrective message, at most about ``limit`` characters.

    Strings are quoted as they are; anything else as JSON when it can be (Python's own
    ``repr`` otherwise: an integer too long to print, a structure too deep to encode). A cut
    value ends in ``...`` and says how many characters were left out.
    """
    text = value if isinstance(value, str) else _as_json(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def echo_list(
    values: Iterable[object], limit: int = ECHO_LIST_LIMIT, *, item_limit: int = ECHO_LIMIT
) -> list[str]:
    """Each value through :func:`echo` (``item_limit`` each), keeping items until ``limit``
    characters in all; a last item says how many were left out."""
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


ONE_LINE_LIMIT = 500
"""Characters of a one-line message kept before it is cut."""


def one_line(value: BaseException | str, limit: int = ONE_LINE_LIMIT) -> str:
    """``value`` as one bounded line of plain text.

    An exception reads ``TypeName: message`` (the bare name when the message is empty, a
    placeholder when ``str()`` itself fails), except a
    :class:`~sam3_agent.values.errors.UserError`: it is worded for the user and reads as its
    message alone (as the CLI prints it). Runs of whitespace become one space; other
    control, bidi-override and lone-surrogate characters read ``\\xNN`` (:func:`visible`), so
    the line is safe on a terminal and encodes as UTF-8. A line longer than ``limit``
    characters is cut and ends in ``...``.
    """
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
    """One setting that differs, for a refusal: ``--temperature was 0.0, now 0.7`` (strings
    quoted, ``None`` as not given, anything else as JSON)."""
    return f"{name} was {_shown(was)}, now {_shown(now)}"


def _shown(value: object) -> str:
    if value is None:
        return "not given"
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, sort_keys=True)


def _as_json(value: object) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return repr(value)
    except (ValueError, RecursionError):
        return f"<a {type(value).__name__} too large to show>"
