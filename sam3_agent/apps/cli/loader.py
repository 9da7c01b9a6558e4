"""The command loader: a command's module is imported only when it is invoked, so ``--help``
loads nothing heavy; a new command is one more :data:`COMMANDS` row."""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

# typer's groups pass a context of typer's own copy of click, whose module is private: the
# methods below take it as ``ctx: Any`` and hand it on.


@dataclass(frozen=True)
class LazyCommand:
    """A command whose module is imported when it runs; ``summary``: its ``--help`` line."""

    module: str
    function: str
    summary: str

    def load(self, name: str) -> TyperCommand:
        callback = getattr(importlib.import_module(self.module), self.function)
        single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        single.command(name, cls=FlagHelpCommand)(callback)
        return cast(TyperCommand, typer.main.get_command(single))


def _as_flag(option: TyperOption | None) -> TyperOption | None:
    """``--help`` listed without typer's ``<bool>`` placeholder."""
    if option is not None:
        option.metavar = ""
    return option


class FlagHelpCommand(TyperCommand):
    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _as_flag(super().get_help_option(ctx))


COMMANDS: dict[str, LazyCommand] = {
    name: LazyCommand(f"sam3_agent.apps.cli.{module}", function, summary)
    for name, module, function, summary in [
        ("run", "run", "run_command",
         "Segment what QUERY describes in IMAGE; write result.json, overlay.png, trace.jsonl."),
        ("track", "track", "track_command",
         "Track what QUERY describes through VIDEO; write result.json, overlay.mp4, trace.jsonl."),
        ("eval", "evaluate", "eval_command",
         "Evaluate on a dataset; rerun the same command to resume after a stop."),
        ("batch", "batch", "batch_command",
         "Run the agent on many requests; rerun the same command to resume after a stop."),
        ("report", "report", "report_command",
         "Write metrics.json, report.md, the IoU histogram and a gallery for run directories."),
        ("serve-sam3", "serve", "serve_sam3",
         "Serve SAM 3 over HTTP (agents use it with --sam3-url)."),
        ("inspect", "inspect", "inspect_command",
         "Show a session round by round from its run directory, in the terminal or as HTML."),
        ("demo", "demo", "demo_command",
         "Serve a web page: upload an image or a video, say what to segment, watch each round."),
        ("mcp", "mcp", "mcp_command",
         "Serve the agent to MCP clients (tools segment, track, segment_phrase), over stdio."),
    ]
}  # fmt: skip


class LazyGroup(TyperGroup):
    """A typer group whose :data:`COMMANDS` are imported only when one is invoked."""

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _as_flag(super().get_help_option(ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        listed = list(super().list_commands(ctx))
        return listed + [name for name in COMMANDS if name not in listed]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in COMMANDS:
            return command
        return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args and not args[0].startswith("-") and not ctx.resilient_parsing:
            known = self.list_commands(ctx)
            if args[0] not in known:
                _unknown_command(args[0], known)
        name, command, rest = super().resolve_command(ctx, args)
        if name in COMMANDS and name not in self.commands:
            self.commands[name] = COMMANDS[name].load(name)
        if name is not None and name in self.commands:
            command = self.commands[name]
        return name, command, rest


def _unknown_command(name: str, known: list[str]) -> NoReturn:
    """One line naming the closest command, and the usage exit code."""
    from sam3_agent.apps.cli.console import EXIT_USAGE, say

    close = difflib.get_close_matches(name, known, n=1)
    fix = f"did you mean {close[0]}?" if close else f"the commands are {', '.join(known)}"
    say(("error:", "red"), f" no such command {name!r}: {fix}")
    raise typer.Exit(EXIT_USAGE)
