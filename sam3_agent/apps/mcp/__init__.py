"""``sam3-agent mcp``: the agent as a Model Context Protocol server, for other agents to call."""
