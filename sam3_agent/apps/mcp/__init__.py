"""``sam3-agent mcp``: the agent as a Model Context Protocol server, for other agents to call
(:mod:`.server` the tools and transports, :mod:`.runner` the calls on models built once,
:mod:`.inputs` what a call names as its image or video)."""
