"""A Hugging Face hub on 127.0.0.1 that serves only ``config.json`` files, for tests of
:class:`sam3_agent.backends.hub.HfHub` through the real ``hf_hub_download``.

``repos`` maps a repo id to its config (a dict), or to an error the real hub gives: ``"gated"``
(403, ``X-Error-Code: GatedRepo``); an id not listed gets 404 ``RepoNotFound``. Every
requested path is recorded, so a test can show that nothing but ``config.json`` was asked.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "0" * 40


@dataclass
class HubState:
    repos: dict[str, Any]
    paths: list[str] = field(default_factory=list)
    url: str = ""


def _handler(state: HubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, body: bool) -> None:
            state.paths.append(self.path)
            repo, sep, file = self.path.lstrip("/").partition("/resolve/main/")
            config = state.repos.get(repo)
            if not sep or config is None:
                return self._error(404, "RepoNotFound", "Repository not found")
            if config == "gated":
                return self._error(403, "GatedRepo", "Access to this model is restricted")
            if file != "config.json":
                return self._error(404, "EntryNotFound", "Entry not found")
            data = json.dumps(config).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("X-Repo-Commit", COMMIT)
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _error(self, status: int, code: str, message: str) -> None:
            data = json.dumps({"error": message}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(data)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

    return Handler


@contextmanager
def hub_server(repos: dict[str, Any]) -> Iterator[HubState]:
    """Serve ``repos`` on a free 127.0.0.1 port for the block; ``state.url`` is its base."""
    state = HubState(dict(repos))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
