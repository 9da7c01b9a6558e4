"""A web server on 127.0.0.1 serving what a test puts in ``routes``, for the URL inputs of
:mod:`sam3_agent.media.fetch`. A route is a :class:`Route` (status, headers, body, a pause
before the body); every request path is recorded, so a test counts downloads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Route:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    length: bool = True  # send Content-Length (else the body ends with the connection)
    stall_s: float = 0.0  # sleep after the headers and the first byte


@dataclass
class MediaServer:
    routes: dict[str, Route] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)
    base: str = ""

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def hits(self, path: str) -> int:
        return self.paths.count(path)


def _handler(state: MediaServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            state.paths.append(self.path)
            route = state.routes.get(self.path, Route(b"not found", 404))
            self.send_response(route.status)
            for key, value in route.headers.items():
                self.send_header(key, value)
            if route.length:
                self.send_header("Content-Length", str(len(route.body)))
            self.end_headers()
            try:
                if route.stall_s:
                    self.wfile.write(route.body[:1])
                    self.wfile.flush()
                    time.sleep(route.stall_s)
                    self.wfile.write(route.body[1:])
                else:
                    self.wfile.write(route.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a limit, a timeout): what the test wanted

    return Handler


@contextmanager
def media_server() -> Iterator[MediaServer]:
    state = MediaServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
