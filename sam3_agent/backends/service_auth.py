"""The SAM 3 service's bearer token variable, in a module importing nothing, so the CLI
declares its flags without the wire schemas and nothing imports it in a cycle."""

TOKEN_ENV = "SAM3_AGENT_TOKEN"
