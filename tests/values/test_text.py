"""values.text.one_line: the one bounded, plain formatter of one-line messages."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from sam3_agent.values.errors import ChatModelError, ImageLoadError
from sam3_agent.values.text import ONE_LINE_LIMIT, one_line


@given(st.text(), st.integers(min_value=3, max_value=2000))
def test_any_text_is_one_bounded_printable_line(text: str, limit: int) -> None:
    line = one_line(ValueError(text), limit)
    assert len(line) <= limit
    assert not any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") for c in line)
    line.encode("utf-8")  # lone surrogates are escaped, not kept


def test_errors_are_named_except_user_errors() -> None:
    assert one_line(ValueError("bad\n  value")) == "ValueError: bad value"
    assert one_line(ValueError()) == "ValueError"
    assert one_line(ChatModelError("endpoint down")) == "ChatModelError: endpoint down"
    assert one_line(ImageLoadError("cannot read image a.png")) == "cannot read image a.png"


def test_long_text_is_cut_with_a_mark() -> None:
    line = one_line("x" * (ONE_LINE_LIMIT + 10))
    assert len(line) == ONE_LINE_LIMIT and line.endswith("...")


def test_control_bytes_are_shown_not_sent() -> None:
    assert one_line("red \x1b[31m bell \x07") == "red \\x1b[31m bell \\x07"


def test_an_error_whose_message_raises_still_gives_a_line() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert one_line(Broken()) == "Broken: (the error's message cannot be shown)"
