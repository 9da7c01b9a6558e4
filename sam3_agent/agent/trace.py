"""``trace.jsonl``: one record per model call (``main``, ``check``, ``digest``), and the
images they reference."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sam3_agent.agent import rundir
from sam3_agent.values.files import atomic_write_bytes, json_text, safe_name, utf8
from sam3_agent.values.images import EncodedImage
from sam3_agent.values.messages import ChatMessage, ImagePart, TextPart


class Trace:
    """``trace.jsonl`` and the files it references, each written once (``directory=None``:
    nothing); a resumed session's keeps its ``committed_bytes``, what followed is cut off."""

    def __init__(self, directory: Path | None, committed_bytes: int | None = None) -> None:
        self.directory = directory
        self._written: set[str] = set()
        self._lock = threading.Lock()
        if directory is None:
            return
        if committed_bytes is not None:  # the resumed round writes the rest again
            with open(directory / rundir.TRACE, "r+b") as f:
                f.truncate(committed_bytes)
        else:
            (directory / rundir.IMAGES_DIR).mkdir(parents=True, exist_ok=True)
            (directory / rundir.TRACE).write_text("")

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    def save_text(self, name: str, text: str) -> str:
        name = safe_name(name)
        if self.directory is not None and name not in self._written:
            atomic_write_bytes(self.directory / name, utf8(text))
            self._written.add(name)
        return name

    def save_image(self, image: EncodedImage) -> str:
        rel = f"{rundir.IMAGES_DIR}/{safe_name(image.name)}"
        if self.directory is not None and rel not in self._written:
            atomic_write_bytes(self.directory / rel, image.data)
            self._written.add(rel)
        return rel

    def messages(
        self, messages: Sequence[ChatMessage], *, system_ref: str | None = None
    ) -> list[dict[str, Any]]:
        """The context as sent, JSON-ready: images and the system prompt by file."""
        out: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "system" and system_ref is not None:
                out.append({"role": "system", "content": [{"type": "file", "file": system_ref}]})
                continue
            content: list[dict[str, Any]] = []
            for part in m.parts:
                if isinstance(part, ImagePart):
                    content.append({"type": "image", "file": self.save_image(part.image)})
                elif isinstance(part, TextPart):
                    content.append({"type": "text", "text": part.text})
            entry: dict[str, Any] = {"role": m.role, "content": content}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
                ]
            if m.tool_call_id is not None:
                entry["tool_call_id"] = m.tool_call_id
            out.append(entry)
        return out

    def record(self, record: dict[str, Any]) -> None:
        if self.directory is None:
            return
        line = json_text(record) + "\n"
        with self._lock, open(self.directory / rundir.TRACE, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
