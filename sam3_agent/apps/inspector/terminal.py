"""The session in the terminal, with rich: every run string as :class:`rich.text.Text` (never
markup), control characters visible."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sam3_agent.apps.inspector import summary
from sam3_agent.apps.inspector.views import CallView, MessageView, Part, RoundView, RunView
from sam3_agent.values.text import visible


def plain(text: str, style: str = "", limit: int | None = None) -> Text:
    """Untrusted ``text`` as rich text: never read as markup, control characters visible."""
    return Text(visible(text, limit), style=style)


def render(
    run: RunView, console: Console, *, rounds: set[int] | None = None, full: bool = False
) -> None:
    """Print ``run`` round by round; only ``rounds`` when given; ``full``: texts uncut."""
    limit = None if full else 300
    facts = Table.grid(padding=(0, 2))
    for label, value in summary.run_facts(run):
        facts.add_row(plain(label, "bold"), plain(value))
    console.print(Panel(facts, title="sam3-agent session", title_align="left"))
    for note in run.notes:
        console.print(plain(f"note: {note}", "yellow"))
    for view in run.rounds:
        if rounds is None or view.number in rounds:
            console.print(_round(view, limit, full))


def _round(view: RoundView, limit: int | None, full: bool) -> Panel:
    body: list[RenderableType] = []
    if view.complete:
        body.append(plain(summary.context_heading(view), "bold"))
        body.append(_context_table(view.messages, limit))
        body.append(plain("what the context left out:", "bold"))
        body.extend(plain(f"  {line}") for line in summary.eviction_lines(view))
        for digest in view.digests:
            body.append(_call(digest, limit))
        if view.thinking and full:
            body.append(Group(plain("thinking:", "bold"), plain(view.thinking, "dim", limit)))
        if view.reasoning:
            reasoning = plain(view.reasoning, "dim", limit)
            body.append(Group(plain("reasoning channel:", "bold"), reasoning))
        body.append(Group(plain("reply:", "bold"), plain(view.reply, "", limit)))
        if view.cut:
            body.append(plain(f"cut after the first tool call: {view.cut}", "dim", limit))
        tool = view.tool_name or "(no tool call)"
        params = "" if view.tool_parameters is None else " " + summary.compact(view.tool_parameters)
        body.append(plain(f"tool: {tool}{params}", "cyan"))
        outcome = f"outcome ({view.outcome_kind}): {view.outcome_text}"
        body.append(plain(outcome, "green" if view.outcome_kind != "correction" else "red", limit))
        if view.outcome_image is not None:
            body.append(plain(f"  [image {view.outcome_image.label}]", "magenta"))
        if kept := summary.kept_line(view):
            body.append(plain(kept, "cyan", limit))
        usage = summary.usage_line(view.usage, view.latency_s, view.cached, view.round_s)
        body.append(plain(usage, "dim"))
    else:
        body.extend(_call(d, limit) for d in view.digests)
    if view.checks:
        body.append(plain(summary.checks_summary(view), "bold"))
        for check in view.checks:
            line = f"  {check.title}: {check.verdict or 'no verdict'}; "
            line += summary.usage_line(check.usage, check.latency_s)
            body.append(plain(line, "green" if check.verdict == "accept" else "yellow"))
            if full:
                body.append(plain(f"    reply: {check.reply}", "dim"))
    return Panel(Group(*body), title=plain(summary.round_title(view)), title_align="left")


def _context_table(messages: tuple[MessageView, ...], limit: int | None) -> Table:
    table = Table(show_edge=False, pad_edge=False, expand=False)
    for column in ("#", "zone", "role", "tokens", "content"):
        table.add_column(column, justify="right" if column in ("#", "tokens") else "left")
    for m in messages:
        content = _parts(m.parts, limit)
        table.add_row(str(m.index), plain(m.zone), plain(m.role), str(m.tokens), content)
    return table


def _parts(parts: tuple[Part, ...], limit: int | None) -> Text:
    out = Text()
    for part in parts:
        if part.kind == "image" and part.image is not None:
            out.append(plain(f"[image {part.image.label}] ", "magenta"))
        elif part.kind == "file":
            out.append(plain(f"[prompt file {part.text}] ", "magenta"))
        elif part.kind == "call":
            out.append(plain(f" [native tool call: {part.text}]", "cyan", limit))
        else:
            out.append(plain(part.text, "", limit))
    return out


def _call(call: CallView, limit: int | None) -> RenderableType:
    head = f"{call.title}: {summary.usage_line(call.usage, call.latency_s)}"
    return Group(plain(head, "bold"), plain(call.reply, "dim", limit))
