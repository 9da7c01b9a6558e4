"""The session as one self-contained HTML file: inline styles, ``data:`` images (each inlined
once), no script, a CSP that forbids loading anything; every run string goes through
:func:`esc`."""

from __future__ import annotations

import base64
import html

from sam3_agent.apps.inspector import summary, views
from sam3_agent.values.text import visible

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin: 0 0 .4em; }
h3 { font-size: 1em; margin: .6em 0 .2em; }
table.facts td { padding: .1em .8em .1em 0; vertical-align: top; }
section.round { border: 1px solid #bbb; border-radius: 6px; padding: .6em 1em; margin: 1em 0; }
section.round[data-complete="false"] { border-style: dashed; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6; padding: .4em .6em; }
.zone { border-left: 4px solid #8ab; padding-left: .6em; margin: .4em 0; }
.zone[data-zone="pinned"] { border-color: #c93; }
.message .meta, .usage, .note { color: #555; font-size: .9em; }
.outcome[data-kind="correction"] pre { background: #fbeaea; }
details { margin: .3em 0; } summary { cursor: pointer; }
details.check { border-left: 3px solid #9c9; padding-left: .6em; }
details.check[data-verdict^="reject"] { border-color: #d88; }
figure { margin: .3em 0; } img { max-width: 100%; height: auto; border: 1px solid #ccc; }
.note { color: #a60; }
"""


def esc(text: object) -> str:
    """``text`` for HTML text or a quoted attribute: escaped, control characters visible."""
    return html.escape(visible(str(text)), quote=True)


class _Images:
    """Inlines each image once and links to it afterwards."""

    def __init__(self) -> None:
        self.anchors: dict[str, str] = {}

    def show(self, image: views.ImageRef) -> str:
        if image.data is None or image.mime is None:
            return f'<p class="note">[image {esc(image.label)}]</p>'
        anchor = self.anchors.get(image.file)
        if anchor is not None:
            label = esc(f"[image {image.label}: shown above]")
            return f'<p><a class="imgref" href="#{anchor}">{label}</a></p>'
        anchor = f"img-{len(self.anchors) + 1}"
        self.anchors[image.file] = anchor
        # base64 and a mime from the magic bytes need no escaping; alt text and caption do.
        url = f"data:{image.mime};base64,{base64.b64encode(image.data).decode('ascii')}"
        return (
            f'<figure id="{anchor}"><img src="{url}" alt="{esc(image.file)}">'
            f"<figcaption>{esc(image.label)}</figcaption></figure>"
        )


def render(run: views.RunView) -> str:
    """The whole page for ``run``."""
    images = _Images()
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        f"<title>sam3-agent session: {esc(run.query or run.directory.name)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>sam3-agent session</h1>",
        '<table class="facts">',
    ]
    out += [f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in summary.run_facts(run)]
    out.append("</table>")
    out += [f'<p class="note">{esc(n)}</p>' for n in run.notes]
    out.append('<nav><p>Rounds: ' + " ".join(
        f'<a href="#round-{v.number}">{v.number}</a>' for v in run.rounds
    ) + "</p></nav>")  # fmt: skip
    prompts = (("system_prompt.txt", run.system_prompt), ("checker_prompt.txt", run.checker_prompt))
    out += [_folded("prompt", name, text, f' id="prompt-{esc(name)}"') for name, text in prompts
            if text is not None]  # fmt: skip
    out += [_round(view, images) for view in run.rounds]
    out.append("</body></html>")
    return "\n".join(out)


def _round(view: views.RoundView, images: _Images) -> str:
    complete = "true" if view.complete else "false"
    out = [
        f'<section class="round" id="round-{view.number}" data-round="{view.number}" '
        f'data-complete="{complete}">',
        f"<h2>{esc(summary.round_title(view))}</h2>",
    ]
    if view.complete:
        usage = summary.usage_line(view.usage, view.latency_s, view.cached, view.round_s)
        out.append(f'<p class="usage">{esc(usage)}</p>')
        out.append(_context(view, images))
        out.append('<div class="eviction"><h3>What the context left out</h3><ul>')
        out += [f"<li>{esc(line)}</li>" for line in summary.eviction_lines(view)]
        out.append("</ul></div>")
    out += [_call(d, images) for d in view.digests]
    if view.complete:
        if view.thinking:
            out.append(_folded("thinking", "Thinking", view.thinking))
        if view.reasoning:
            out.append(_folded("reasoning", "Reasoning channel", view.reasoning))
        finish = f" (finish: {view.finish_reason})" if view.finish_reason else ""
        out.append(f'<div class="reply"><h3>Reply{esc(finish)}</h3><pre>{esc(view.reply)}</pre>')
        if view.cut:
            out.append(
                f'<p class="note">Cut after the first tool call:</p><pre>{esc(view.cut)}</pre>'
            )
        out.append("</div>")
        params = "" if view.tool_parameters is None else " " + summary.compact(view.tool_parameters)
        out.append(
            f'<div class="outcome" data-kind="{esc(view.outcome_kind)}"><h3>Tool: '
            f"{esc((view.tool_name or '(no tool call)') + params)}</h3>"
            f"<p>outcome: {esc(view.outcome_kind or '?')}</p><pre>{esc(view.outcome_text)}</pre>"
        )
        if view.outcome_image is not None:
            out.append(images.show(view.outcome_image))
        if kept := summary.kept_line(view):
            out.append(f'<p class="kept">{esc(kept)}</p>')
        out.append("</div>")
    if view.checks:
        checks = esc(summary.checks_summary(view))
        out.append(f'<details class="checks"><summary>{checks}</summary>')
        out += [_call(c, images) for c in view.checks]
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def _context(view: views.RoundView, images: _Images) -> str:
    heading = esc(summary.context_heading(view))
    out = [f'<details class="context" open><summary>{heading}</summary>']
    for zone, messages in view.zones.items():
        tokens = sum(m.tokens for m in messages)
        out.append(
            f'<div class="zone" data-zone="{esc(zone)}"><h3>{esc(zone)}: {len(messages)} '
            f"message(s), {tokens} tokens</h3>"
        )
        out += [_message(m, images) for m in messages]
        out.append("</div>")
    out.append("</details>")
    return "\n".join(out)


def _message(message: views.MessageView, images: _Images) -> str:
    return "\n".join([
        f'<div class="message" data-role="{esc(message.role)}">'
        f'<div class="meta">#{message.index} {esc(message.role)}, {message.tokens} tokens</div>',
        *(_part(p, images) for p in message.parts), "</div>",
    ])  # fmt: skip


def _part(part: views.Part, images: _Images) -> str:
    if part.kind == "image" and part.image is not None:
        return images.show(part.image)
    if part.kind == "file":
        return f'<p class="file">the prompt in {esc(part.text)} (shown at the top)</p>'
    if part.kind == "call":
        return f'<p class="call">native tool call: <code>{esc(part.text)}</code></p>'
    return f"<pre>{esc(part.text)}</pre>"


def _call(call: views.CallView, images: _Images) -> str:
    verdict = f' data-verdict="{esc(call.verdict)}"' if call.verdict else ""
    verdict_text = f"{call.verdict}; " if call.verdict else ""
    head = f"{call.title}: {verdict_text}{summary.usage_line(call.usage, call.latency_s)}"
    out = [f'<details class="{call.kind}"{verdict}><summary>{esc(head)}</summary>']
    out += [_message(m, images) for m in call.messages]
    if call.reasoning:
        out.append(f"<p>Reasoning channel:</p><pre>{esc(call.reasoning)}</pre>")
    out.append(f"<p>Reply:</p><pre>{esc(call.reply)}</pre></details>")
    return "\n".join(out)


def _folded(css_class: str, title: str, text: str, attributes: str = "") -> str:
    return (
        f'<details class="{css_class}"{attributes}><summary>{esc(title)}</summary>'
        f"<pre>{esc(text)}</pre></details>"
    )
