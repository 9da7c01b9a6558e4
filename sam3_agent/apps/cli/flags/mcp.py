"""The flags of ``sam3-agent mcp`` beside the backend and agent ones, checked before any model
loads."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sam3_agent.apps.cli.flags.compose import FlagGroup, flag
from sam3_agent.apps.service.server import check_bind_security, check_port_free
from sam3_agent.values.errors import UserError
from sam3_agent.values.paths import check_writable_dir
from sam3_agent.values.text import visible

MCP_PANEL = "MCP server"
MCP_TOKEN_ENV = "SAM3_AGENT_MCP_TOKEN"

_mcp = functools.partial(flag, panel=MCP_PANEL)

MCP_FLAGS = (
    _mcp("http", str | None, None, "--http", metavar="ADDRESS",
         help="Serve over streamable HTTP at ADDRESS, HOST:PORT (http://HOST:PORT/mcp), instead "
         "of stdio. Anything but loopback requires a token."),
    _mcp("token", str | None, None, "--token", metavar="TOKEN", envvar=MCP_TOKEN_ENV,
         help="Bearer token HTTP clients must send (required unless listening on loopback). "
         f"Prefer the {MCP_TOKEN_ENV} environment variable: a flag is visible in `ps`."),
    _mcp("out", Path, Path("runs/mcp"), "--out", "-o", metavar="DIR",
         help="Each tool call writes its run directory under here."),
    _mcp("max_concurrent", int, 2, "--max-concurrent", metavar="N",
         help="Tool calls at work at once; the others wait for a slot."),
)  # fmt: skip


@dataclass(frozen=True)
class McpFlags:
    """What the ``MCP`` group hands the command: ``host``/``port`` None for stdio."""

    host: str | None
    port: int | None
    token: str | None
    out: Path
    max_concurrent: int


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port in 1..65535."""
    host, colon, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(
            "--http must be HOST:PORT with a port in 1..65535 (e.g. 127.0.0.1:8765), "
            f"got {visible(text, 80)!r}"
        )
    return host, int(port)


def _mcp_flags(values: dict[str, Any], built: dict[str, Any]) -> McpFlags:
    if values["max_concurrent"] < 1:
        raise UserError(f"--max-concurrent must be >= 1, got {values['max_concurrent']}")
    token = values["token"] or None
    host: str | None = None
    port: int | None = None
    if values["http"] is not None:
        host, port = parse_bind(values["http"])
        check_bind_security(
            host, token, serving="serve MCP", token_env=MCP_TOKEN_ENV,
            spends="spend your GPU and tokens",
        )  # fmt: skip
        check_port_free(host, port)
    out = Path(values["out"]).expanduser()
    check_writable_dir(out, "--out")
    return McpFlags(host, port, token, out, values["max_concurrent"])


MCP = FlagGroup("mcp", MCP_FLAGS, _mcp_flags)
"""The ``mcp`` flags, checked, as :class:`McpFlags`."""
