"""Every flag group, declared once (a module per kind) and composed into each command that
takes it (:func:`~sam3_agent.apps.cli.flags.compose.with_flags`); nothing heavy imported."""
