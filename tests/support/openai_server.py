"""A scripted OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1, for tests.

It answers from a queue of :class:`Reply` values (or from a function of the request), can
fail on purpose (429 with ``Retry-After``, 500, a hang past the client's timeout, a dropped
connection, a reply cut off by the token limit), and records every request it got with its
start and end times (``time.monotonic``, comparable with the test's own clock). A
:class:`Rendezvous` shows that requests were in flight together without timing them.

The server binds a free port on the loopback interface only and runs in a daemon thread;
:func:`serve` stops it, and wakes any handler still sleeping, when the ``with`` block ends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        text: the assistant message content.
        reasoning: put in the message's ``reasoning_field`` when given.
        finish_reason: defaults to ``"tool_calls"`` when ``tool_calls`` is set, else ``"stop"``.
        tool_calls: ``(name, arguments JSON)`` pairs returned as native tool calls.
        delay_s: wait before answering (on top of the server's ``latency_s``).
        status: an HTTP error status (429, 500, 401, ...) instead of a completion.
        retry_after: the ``Retry-After`` header sent with an error status.
        error_body: the JSON body of an error status (default: OpenAI's ``{"error": ...}``).
        drop: close the connection without answering.
        usage: ``(prompt_tokens, completion_tokens)``; ``None`` leaves usage out.
    """

    text: str = "ok"
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    finish_reason: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    status: int = 200
    retry_after: str | None = None
    error_body: dict[str, Any] | None = None
    drop: bool = False
    usage: tuple[int, int] | None = (11, 7)

    @classmethod
    def rate_limited(cls, retry_after: str | None = "0") -> Reply:
        return cls(status=429, retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        return cls(status=status)

    @classmethod
    def hang(cls, seconds: float) -> Reply:
        """Answer only after ``seconds``: longer than the client's timeout, it never arrives."""
        return cls(delay_s=seconds)

    @classmethod
    def dropped(cls) -> Reply:
        return cls(drop=True)

    @classmethod
    def truncated(cls, text: str = "<think>I was saying") -> Reply:
        return cls(text=text, finish_reason="length")


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received; ``started``/``ended`` are ``time.monotonic()``."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    started: float
    ended: float


Responder = Callable[[dict[str, Any]], Reply]


def _every_request(body: dict[str, Any]) -> bool:
    return True


@dataclass
class Rendezvous:
    """A barrier: each admitted request is held until ``parties`` of them are held at once.

    It proves concurrency without a clock: requests sent one after another never fill it,
    so the first one waits ``timeout_s`` (generous: a slow machine only waits longer), the
    barrier breaks, every request is answered anyway, and :attr:`met` is False.

    Attributes:
        parties: how many requests must be in flight together.
        admits: which requests take part (a function of the request body); others pass.
        filled: how many times ``parties`` requests met.
    """

    parties: int
    admits: Callable[[dict[str, Any]], bool] = _every_request
    timeout_s: float = 60.0
    filled: int = 0
    barrier: threading.Barrier = field(init=False)

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(self.parties, timeout=self.timeout_s)

    @property
    def met(self) -> bool:
        """True when the parties met and nobody gave up waiting."""
        return self.filled > 0 and not self.barrier.broken

    def wait(self, body: dict[str, Any]) -> None:
        if not self.admits(body):
            return
        try:
            if self.barrier.wait() == 0:  # one thread per meeting counts it
                self.filled += 1
        except threading.BrokenBarrierError:
            pass  # timed out or the server stopped: answer; ``met`` reports it


@dataclass
class ScriptedServer:
    """State shared by the handler threads. Tests set ``script``/``responder``/``latency_s``.

    ``script`` is consumed in arrival order; when it is empty, ``responder`` (a function of
    the request body) answers, and without one ``default`` does.
    """

    script: list[Reply] = field(default_factory=list)
    responder: Responder | None = None
    default: Reply = field(default_factory=Reply)
    latency_s: float = 0.0
    rendezvous: Rendezvous | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def completions(self) -> list[RecordedRequest]:
        """Recorded chat-completion requests, in arrival order."""
        with self.lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            if self.script:
                return self.script.pop(0)
        if self.responder is not None:
            return self.responder(body)
        return self.default

    def record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(request)

    def wait(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops."""
        if seconds > 0:
            self.stopping.wait(seconds)


def completion_body(reply: Reply, model: str) -> dict[str, Any]:
    """The JSON of a chat completion carrying ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning is not None:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(reply.tool_calls)
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if reply.usage is not None:
        prompt, completion = reply.usage
        body["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    return body


def _handler_class(state: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as separate writes; without this, Nagle plus delayed ACK
        # add ~40 ms to every reply.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the recorded requests are the log."""

        def do_POST(self) -> None:
            started = time.monotonic()
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = state.next_reply(body)
            if state.rendezvous is not None:
                state.rendezvous.wait(body)
            state.wait(state.latency_s + reply.delay_s)
            # Recorded before the answer goes out, so a test that has its reply also has the
            # record; ``ended`` is when the server finished working on the request.
            state.record(RecordedRequest(self.path, headers, body, started, time.monotonic()))
            try:
                if state.stopping.is_set() or reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if reply.status != 200:
                    self._send(
                        reply.status,
                        reply.error_body
                        or {"error": {"message": f"scripted HTTP {reply.status}", "type": "test"}},
                        {"Retry-After": reply.retry_after} if reply.retry_after else {},
                    )
                else:
                    self._send(200, completion_body(reply, str(body.get("model", "test"))), {})
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up first (it timed out): nothing left to answer.
                self.close_connection = True

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64


@contextmanager
def serve(state: ScriptedServer | None = None) -> Iterator[ScriptedServer]:
    """Run a scripted server on 127.0.0.1 (free port) for the duration of the block."""
    state = state or ScriptedServer()
    server = _Server(("127.0.0.1", 0), _handler_class(state))
    state.host, state.port = "127.0.0.1", int(server.server_address[1])
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="openai-test-server", daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        if state.rendezvous is not None:
            state.rendezvous.barrier.abort()  # wake handlers still waiting for partners
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
