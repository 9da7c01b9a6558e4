"""sam3-agent as an MCP server: the tools ``segment``, ``track`` and ``segment_phrase``, over
stdio or streamable HTTP; every failure of a call is a one-line tool error."""

from __future__ import annotations

import base64
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.context import CallNext, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send

from sam3_agent.agent import rundir
from sam3_agent.agent.events import RoundEvent
from sam3_agent.agent.result import AgentResult, VideoResult
from sam3_agent.apps.mcp.runner import Done, McpRunner, Report
from sam3_agent.values.errors import Sam3AgentError
from sam3_agent.values.text import one_line
from sam3_agent.values.version import __version__

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
R = TypeVar("R", AgentResult, VideoResult)

ImageArg = Annotated[str | None, Field(description=(
    "The image: a local file path on the server's machine or an http(s):// URL. Give this "
    "or image_base64."))]  # fmt: skip
Base64Arg = Annotated[str | None, Field(description=(
    "The image's bytes (JPEG, PNG, WebP, ...) as base64, or a data:image/...;base64, URL. "
    "Give this or image."))]  # fmt: skip
MaxRoundsArg = Annotated[int | None, Field(description=(
    "Most main MLLM calls of this session (default: the server's --max-rounds)."))]  # fmt: skip

INSTRUCTIONS = (
    "sam3-agent segments what a person describes in words: an MLLM uses SAM 3 as a tool. "
    "segment: an image and a query ('the leftmost child in a blue vest'); track: the same "
    "through a video; segment_phrase: SAM 3 alone on a short noun phrase, no MLLM. Masks "
    "are COCO RLE with XYXY pixel boxes; each call's files are in its run_dir."
)


def create_server(runner: McpRunner) -> MCPServer:
    """The MCP server answering with ``runner`` (its models already built)."""
    server: MCPServer = MCPServer(
        name="sam3-agent", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING",
        middleware=[OneLineToolErrors()],
    )  # fmt: skip
    works = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

    @server.tool(annotations=works)
    async def segment(
        query: Annotated[str, Field(description="What to segment, e.g. 'the leftmost child'.")],
        ctx: Context,
        image: ImageArg = None,
        image_base64: Base64Arg = None,
        max_rounds: MaxRoundsArg = None,
    ) -> CallToolResult:
        """Segment what QUERY describes in an image: the MLLM asks SAM 3 for candidate masks,
        checks them and picks the ones meant. Returns the masks (COCO RLE, XYXY boxes,
        scores), rounds, tokens and the run directory, with the overlay as an image. Each
        round is reported as progress."""
        done = runner.segment(
            image, image_base64, query, _progress(ctx, max_rounds or runner.config.max_rounds),
            max_rounds=max_rounds,
        )  # fmt: skip
        return await _answered(done, image_answer)

    @server.tool(annotations=works)
    async def track(
        video: Annotated[str, Field(description=(
            "The video (MP4, MOV, WebM, ...): a local file, a folder of frames or an "
            "http(s):// URL."))],
        query: Annotated[str, Field(description="What to segment and track.")],
        ctx: Context,
        max_rounds: MaxRoundsArg = None,
        stride: Annotated[int, Field(description="Track every stride-th frame.")] = 1,
        max_frames: Annotated[int | None, Field(description="At most this many frames.")] = None,
    ) -> CallToolResult:  # fmt: skip
        """Segment and track what QUERY describes through a video. Returns each track's id,
        score and frames, rounds, tokens, the run directory and the overlay video's path
        (the masks per frame are in run_dir/result.json). Each round is reported as
        progress."""
        done = runner.track(
            video, query, _progress(ctx, max_rounds or runner.config.max_rounds),
            max_rounds=max_rounds, stride=stride, max_frames=max_frames,
        )  # fmt: skip
        return await _answered(done, video_answer)

    @server.tool(annotations=works)
    async def segment_phrase(
        phrase: Annotated[str, Field(description="A short noun phrase, e.g. 'dog'.")],
        image: ImageArg = None,
        image_base64: Base64Arg = None,
        score_threshold: Annotated[float | None, Field(description=(
            "Lowest SAM 3 score kept (default: the server's --score-threshold)."))] = None,
    ) -> CallToolResult:  # fmt: skip
        """SAM 3 alone, no MLLM: every mask of PHRASE in an image scoring at least the
        threshold (COCO RLE, XYXY boxes, scores), with the overlay as an image."""
        done = runner.segment_phrase(image, image_base64, phrase, score_threshold=score_threshold)
        return await _answered(done, image_answer)

    return server


def _progress(ctx: Context, total: int) -> Report:
    """The runner's ``report``: each round as an MCP progress notification."""

    async def report(event: RoundEvent) -> None:
        said = f"round {event.round}: {event.tool or 'no tool call'}: {event.summary}"
        await ctx.report_progress(event.round, total, one_line(said))

    return report


async def _answered(
    done: Awaitable[Done[R]], answer: Callable[[Done[R]], CallToolResult]
) -> CallToolResult:
    """The call's result, or a one-line tool error (a bug's traceback logged)."""
    try:
        return answer(await done)
    except Sam3AgentError as e:
        error = one_line(e)
    except Exception as e:
        logger.exception("MCP tool call failed")
        error = one_line(e)
    return CallToolResult(content=[TextContent(type="text", text=error)], is_error=True)


def _usage(document: dict[str, Any], done: Done[Any]) -> dict[str, Any]:
    """What every answer says: status, failure, rounds, tokens and the run directory."""
    return {
        "status": document["status"],
        "failure": document["failure"],
        "rounds": document["rounds"],
        "tokens": document["usage"]["total"],
        "run_dir": str(done.directory),
    }


def image_answer(done: Done[AgentResult]) -> CallToolResult:
    """The masks (COCO RLE, XYXY boxes, scores) and :func:`_usage`, then the overlay PNG."""
    document = done.result.to_json()
    structured = {**_usage(document, done), "image": document["image"], "masks": document["masks"]}
    content: list[TextContent | ImageContent] = [_json_text(structured)]
    overlay = done.directory / rundir.OVERLAY
    if overlay.is_file():
        data = base64.b64encode(overlay.read_bytes()).decode("ascii")
        content.append(ImageContent(type="image", data=data, mime_type="image/png"))
    return CallToolResult(content=list(content), structured_content=structured)


def video_answer(done: Done[VideoResult]) -> CallToolResult:
    """Per track its id, score, frames with a mask and extent, the overlay's path, and
    :func:`_usage`."""
    document = done.result.to_json()
    tracks = [
        {
            "track_id": t["track_id"],
            "score": t["score"],
            "frames_with_mask": sum(s is not None for s in t["segmentations"]),
            "extent": t["extent"],
        }
        for t in document["tracks"]
    ]
    overlay = done.directory / rundir.OVERLAY_VIDEO
    structured = {
        **_usage(document, done),
        "video": document["video"],
        "tracks": tracks,
        "overlay": str(overlay) if overlay.is_file() else None,
    }
    return CallToolResult(content=[_json_text(structured)], structured_content=structured)


def _json_text(document: dict[str, Any]) -> TextContent:
    return TextContent(type="text", text=json.dumps(document, ensure_ascii=False))


class OneLineToolErrors(ServerMiddleware[Any]):
    """Every tool error one line, those the SDK words itself too (a failed schema check)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        result = await call_next(ctx)
        if ctx.method == "tools/call" and isinstance(result, dict) and result.get("isError"):
            for item in result.get("content", []):
                if item.get("type") == "text":
                    item["text"] = one_line(item["text"])
        return result


class BearerToken:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.expected = app, token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers", [])).get(b"authorization", b"")
            scheme, _, given = header.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.expected):
                body = b'{"error": "missing or wrong bearer token"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode())]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_stdio(server: MCPServer) -> None:
    """Serve on stdin/stdout until the client closes them (blocks)."""
    anyio.run(server.run_stdio_async)


def serve_http(
    server: MCPServer, *, host: str, port: int, token: str | None, log_level: str = "warning"
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted (blocks)."""
    from sam3_agent.apps.service.server import check_bind_security, run_app

    check_bind_security(host, token, serving="serve MCP")
    app: ASGIApp = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if token:
        app = BearerToken(app, token)
    logger.info("sam3-agent MCP server on http://%s:%d%s", host, port, MCP_PATH)
    run_app(app, host=host, port=port, log_level=log_level)
