"""``sam3-agent mcp``: the agent as an MCP server over stdio or streamable HTTP; every flag is
checked before any model loads or the ``mcp`` package imports."""

from __future__ import annotations

import importlib.util
import logging

from sam3_agent.apps.cli.console import one_line_errors, say
from sam3_agent.apps.cli.flags.agent import AGENT, BACKENDS, plan_server
from sam3_agent.apps.cli.flags.compose import VERBOSE, with_flags
from sam3_agent.apps.cli.flags.inputs import DOWNLOADS
from sam3_agent.apps.cli.flags.servers import MCP, McpFlags
from sam3_agent.backends.spec import BackendSpec
from sam3_agent.values.config import AgentConfig
from sam3_agent.values.errors import UserError


@with_flags(MCP, BACKENDS, AGENT, DOWNLOADS, VERBOSE)
def mcp_command(
    *,
    mcp: McpFlags,
    backends: BackendSpec,
    config: AgentConfig,
    max_download_mb: int,
    verbose: bool,
) -> None:
    """Serve the agent to MCP clients (tools segment, track, segment_phrase), over stdio.

    With --http HOST:PORT, over streamable HTTP at http://HOST:PORT/mcp. Messages: stderr.

    Exit codes: 0 stdio closed or Ctrl+C, 1 a model or the server failed, 2 a bad flag.
    """
    if mcp.host is not None:  # a server says when it is up
        logging.getLogger().setLevel(logging.DEBUG if verbose else logging.INFO)
    with one_line_errors():
        if importlib.util.find_spec("mcp") is None:
            raise UserError('sam3-agent mcp needs the mcp package: pip install "sam3-agent[mcp]"')
        spec = plan_server(backends, config, mcp.out)  # before any download

        from sam3_agent.apps.mcp.runner import McpRunner
        from sam3_agent.apps.mcp.server import create_server, serve_http, serve_stdio

        say("loading models...")
        runner = McpRunner(
            spec, config, mcp.out, max_concurrent=mcp.max_concurrent,
            max_download_mb=max_download_mb,
        )  # fmt: skip
        server = create_server(runner)
        if mcp.host is None or mcp.port is None:
            say("MCP server on stdio: tools segment, track, segment_phrase")
            serve_stdio(server)
        else:
            say(f"MCP server on http://{mcp.host}:{mcp.port}/mcp (Ctrl+C to stop)")
            log_level = "debug" if verbose else "warning"
            serve_http(server, host=mcp.host, port=mcp.port, token=mcp.token, log_level=log_level)
