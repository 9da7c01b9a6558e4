"""``sam3-agent inspect``: a real run directory in the terminal and as HTML, and hostile traces."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from sam3_agent.agent.context.tokens import MESSAGE_OVERHEAD, TokenCounter
from sam3_agent.agent.loop import Sam3Agent
from sam3_agent.apps.cli.main import app
from sam3_agent.apps.inspector.html_page import render as render_html
from sam3_agent.apps.inspector.model import load_run
from sam3_agent.apps.inspector.terminal import render as render_terminal
from sam3_agent.values.text import visible
from tests.support.fakes import FakeSegmenter, ScriptedChatModel
from tests.support.resume_driver import SCRIPT, VERDICTS, cats

runner = CliRunner()
QUERY = 'the two cats </pre><script>alert("q")</script> [bold]x[/bold]'
VOID = {"meta", "img", "br", "hr", "link", "input", "source", "wbr"}
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "table", "tr", "td",
    "p", "nav", "a", "details", "summary", "pre", "section", "div", "ul", "li", "figure",
    "img", "figcaption", "code",
}  # fmt: skip


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def find_all(self, tag: str, css_class: str | None = None) -> list[Node]:
        found = []
        for child in self.children:
            if child.tag == tag and (css_class is None or child.attrs.get("class") == css_class):
                found.append(child)
            found.extend(child.find_all(tag, css_class))
        return found

    def all_text(self) -> str:
        return "".join(self.text) + "".join(c.all_text() for c in self.children)


class TreeBuilder(HTMLParser):
    """Just enough of a DOM to check nesting; also keeps every tag seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.tags.append((tag, node.attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text.append(data)


def parse(page: str) -> TreeBuilder:
    builder = TreeBuilder()
    builder.feed(page)
    builder.close()
    return builder


def assert_self_contained_and_inert(builder: TreeBuilder) -> None:
    for tag, attrs in builder.tags:
        assert tag in ALLOWED_TAGS, tag
        assert not any(name.startswith("on") for name in attrs), attrs
        if "src" in attrs:
            assert attrs["src"].startswith(("data:image/jpeg;base64,", "data:image/png;base64,"))
        if "href" in attrs:
            assert attrs["href"].startswith("#"), attrs["href"]


@pytest.fixture
def run_dir(tmp_path: Path, image: np.ndarray) -> Path:
    out = tmp_path / "run"
    chat = ScriptedChatModel(replies=list(SCRIPT), verdicts=dict(VERDICTS))
    result = Sam3Agent(FakeSegmenter({"cat": cats}), chat).run(image, QUERY, output_dir=out)
    assert result.status == "masks"
    return out


def test_terminal_shows_each_round_with_its_context_and_folded_checks(run_dir: Path) -> None:
    shown = runner.invoke(app, ["inspect", str(run_dir)], env={"COLUMNS": "160"})
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    for number, tool in enumerate(
        ["segment_phrase", "segment_phrase", "examine_each_mask", "segment_phrase"], start=1
    ):
        assert f"Round {number}: {tool}" in text
    assert "Round 5: select_masks_and_return -> final" in text
    assert "[bold]x[/bold]" in text  # the query's markup is shown, not applied
    round3 = text[text.index("Round 3:") : text.index("Round 4:")]
    assert "3 mask check call(s): 2 accept, 1 reject" in round3
    assert "mask 2, attempt 1: reject" in round3
    # The context policy's record (what was evicted and why) is shown over the bare pruning.
    assert "evicted round 1: before the latest segment_phrase" in round3
    assert "s with the tool" in round3 and "call " in round3  # the round's timings
    assert "[image images/r002_masks.jpg 320x240]" in round3
    only = runner.invoke(app, ["inspect", str(run_dir), "--round", "2"], env={"COLUMNS": "160"})
    assert "Round 2:" in only.stdout and "Round 1:" not in only.stdout


def test_html_has_a_section_per_round_inline_images_and_folded_checks(
    run_dir: Path, tmp_path: Path
) -> None:
    page_path = tmp_path / "session.html"
    made = runner.invoke(app, ["inspect", str(run_dir), "--html", str(page_path)])
    assert made.exit_code == 0, made.output
    page = page_path.read_text()
    builder = parse(page)
    assert_self_contained_and_inert(builder)
    assert "http" not in " ".join(v for _, attrs in builder.tags for v in attrs.values())
    assert not any(tag in ("script", "link", "iframe", "object") for tag, _ in builder.tags)

    sections = builder.root.find_all("section", "round")
    assert [s.attrs["data-round"] for s in sections] == ["1", "2", "3", "4", "5"]
    for section in sections:
        contexts = section.find_all("details", "context")
        assert len(contexts) == 1
        zones = [z.attrs["data-zone"] for z in contexts[0].find_all("div", "zone")]
        assert zones[0] == "pinned"
        assert "tokens" in contexts[0].all_text()
        assert len(section.find_all("div", "reply")) == len(section.find_all("div", "outcome")) == 1
    # Checks are folded inside the round that made them, and only there.
    folded = [len(s.find_all("details", "checks")) for s in sections]
    assert folded == [0, 0, 1, 0, 0]
    checks = sections[2].find_all("details", "checks")[0].find_all("details", "check")
    assert [c.attrs["data-verdict"] for c in checks] == ["accept", "reject", "accept"]

    # Every image the trace refers to is inlined exactly once, byte for byte.
    referenced = set()
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        record = json.loads(line)
        for message in record["context"]:
            referenced |= {p["file"] for p in message["content"] if p.get("type") == "image"}
        if record.get("outcome", {}).get("image"):
            referenced.add(record["outcome"]["image"])
    images = builder.root.find_all("img")
    assert sorted(i.attrs["alt"] for i in images) == sorted(referenced)
    for img in images:
        data = base64.b64decode(img.attrs["src"].split(",", 1)[1])
        assert data == (run_dir / img.attrs["alt"]).read_bytes()
    assert QUERY in builder.root.all_text()  # shown as text, escaped on the way


def test_each_token_count_of_a_round_says_what_it_counts(run_dir: Path) -> None:
    # Three counts of one request: the agent's on its messages, the context policy's on the
    # whole request (the reply's opening too), the endpoint's; the same words in both media.
    first = json.loads((run_dir / "trace.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "main"
    counted = first["tokens_estimate"]["per_message"]
    policy, usage = first["context_policy"], first["usage"]
    expected = [
        f"{len(counted)} message(s), {sum(counted)} tokens counted on its messages "
        "(counted by the agent)",
        "tokens counted on the whole request (messages and the reply's opening): "
        f"{policy['tokens_before']} with every round in full, "
        f"{policy['tokens_after']['total']} sent",
        f"reported by the endpoint: prompt {usage['prompt_tokens']}, "
        f"completion {usage['completion_tokens']} tokens",
    ]
    run = load_run(run_dir)
    console = Console(file=StringIO(), width=300, color_system=None)
    render_terminal(run, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    page = parse(render_html(run)).root.all_text()
    for shown in (text, page):
        for words in expected:
            assert words in shown


def test_counts_from_the_trace_are_preferred_and_eviction_is_explained(run_dir: Path) -> None:
    trace = run_dir / "trace.jsonl"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    for record in records:
        if record["kind"] == "main":
            record["tokens_estimate"] = {"per_message": [7] * len(record["context"])}
            record["context_policy"] = {
                "policy": "decay",
                "budget": {"max_context_tokens": 8192, "limit": 7168, "watermark": 0.7},
                "tokens_before": 9000,
                "tokens_after": {"text": 100, "image": 900, "total": 1000},
                "kept_rounds": [2],
                "evicted": [{"round": 1, "reason": "lowest score", "score": 0.125}],
                "zones": {"pinned": 500, "working": 500},
            }
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = load_run(run_dir)
    assert {m.tokens for r in run.rounds for m in r.messages} == {7}
    console = Console(file=StringIO(), width=200, color_system=None)
    render_terminal(run, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "policy decay, budget 7168 of 8192 tokens, watermark 0.7" in text
    assert "evicted round 1: lowest score (score 0.125)" in text
    assert "counted by the agent" in text


def test_estimates_when_the_trace_has_no_counts(run_dir: Path) -> None:
    trace = run_dir / "trace.jsonl"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    for record in records:
        record.pop("tokens_estimate", None)
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    first = load_run(run_dir).rounds[0].messages
    assert {m.tokens_source for m in first} == {"estimate"}
    counter = TokenCounter()  # the agent's, for a model that is not Qwen3-VL
    system = (run_dir / "system_prompt.txt").read_text()
    # The trace's per-message counts (the agent's counter: ChatML's framing tokens).
    assert first[0].tokens == MESSAGE_OVERHEAD + counter.text(system)
    image_and_text = counter.image(320, 240) + counter.text(first[1].text)
    assert first[1].tokens == MESSAGE_OVERHEAD + image_and_text


@pytest.mark.parametrize("model", ["scripted", "Qwen/Qwen3-VL-8B-Instruct"])
def test_mask_checks_count_as_the_agent_counted_them(
    model: str, tmp_path: Path, image: np.ndarray
) -> None:
    # Check records carry only the agent's total; the inspector counts each message itself
    # and must arrive at the same figure (Qwen3-VL's 32 px cells included).
    out = tmp_path / "run"
    chat = ScriptedChatModel(replies=list(SCRIPT), verdicts=dict(VERDICTS), name=model)
    Sam3Agent(FakeSegmenter({"cat": cats}), chat).run(image, QUERY, output_dir=out)
    traced = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    totals = sorted(r["tokens_estimate"]["total"] for r in traced if r["kind"] == "check")
    checks = [c for r in load_run(out).rounds for c in r.checks]
    assert totals and sorted(c.tokens for c in checks) == totals


def test_a_stopped_session_shows_its_unfinished_round(run_dir: Path, tmp_path: Path) -> None:
    trace = run_dir / "trace.jsonl"
    lines = trace.read_text().splitlines()
    # Killed during round 3's checks: two check records, no main record, a torn line.
    kept = [line for line in lines if json.loads(line)["round"] < 3]
    checks = [line for line in lines if json.loads(line)["kind"] == "check"][:2]
    trace.write_text("\n".join([*kept, *checks]) + '\n{"kind": "check", "rou')
    (run_dir / "result.json").unlink()
    run = load_run(run_dir)
    assert [(r.number, r.complete) for r in run.rounds] == [(1, True), (2, True), (3, False)]
    assert any("incomplete" in note for note in run.notes)
    page = parse(render_html(run))
    sections = page.root.find_all("section", "round")
    assert sections[-1].attrs["data-complete"] == "false"
    assert len(sections[-1].find_all("details", "check")) == 2


def test_a_missing_run_directory_is_one_line(tmp_path: Path) -> None:
    shown = runner.invoke(app, ["inspect", str(tmp_path / "nope")])
    assert shown.exit_code == 2
    assert "not a run directory" in shown.stderr and "Traceback" not in shown.output


def test_html_into_a_directory_is_named_after_the_run_and_the_line_names_that_file(
    run_dir: Path, tmp_path: Path
) -> None:
    pages = tmp_path / "pages"
    pages.mkdir()
    made = runner.invoke(app, ["inspect", str(run_dir), "--html", str(pages)])
    assert made.exit_code == 0, made.output
    page = pages / "run.html"
    assert made.stderr.splitlines() == [f"wrote {page}"]
    assert "<section" in page.read_text(encoding="utf-8")
    assert [p.name for p in pages.iterdir()] == ["run.html"]  # no temporary file left


def test_an_unwritable_html_path_is_one_line_without_a_temporary_name(
    run_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "taken").write_text("a file, not a directory")
    target = tmp_path / "taken" / "page.html"
    shown = runner.invoke(app, ["inspect", str(run_dir), "--html", str(target)])
    assert shown.exit_code == 2
    (line,) = shown.stderr.splitlines()
    assert line.startswith(f"error: cannot write {target}: ") and ".tmp" not in line


@pytest.mark.parametrize(
    ("asked", "line"),
    [
        (["--round", "9"], "error: round 9 not in this session: rounds are 1-5"),
        (
            ["-r", "2", "-r", "0", "-r", "7"],
            "error: rounds 0, 7 not in this session: rounds are 1-5",
        ),
        (
            ["--round", "9", "--html", "page.html"],
            "error: round 9 not in this session: rounds are 1-5",
        ),
    ],
)
def test_a_round_the_session_lacks_is_a_usage_error_listing_the_rounds_it_has(
    run_dir: Path, asked: list[str], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shown = runner.invoke(app, ["inspect", str(run_dir), *asked], env={"COLUMNS": "160"})
    assert shown.exit_code == 2
    assert shown.stderr.splitlines() == [line]
    assert "Round" not in shown.stdout and not Path("page.html").exists()


# -- hostile traces -----------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</pre></details></section><script src=http://evil.example/x.js></script>",
    "javascript:alert(1)",
    "http://evil.example/track.png",
    "../../../../etc/passwd",
    "\x1b[2J\x1b[31mred",
    "\u202eevil",
    "[bold red]markup[/bold red]",
    "<!-- comment --> <![CDATA[x]]> &amp; &lt;",
    "'; DROP TABLE x; --",
]
hostile = st.one_of(
    st.text(),
    st.sampled_from(HOSTILE),
    st.tuples(st.text(max_size=5), st.sampled_from(HOSTILE), st.text(max_size=5)).map("".join),
)


def hostile_session(
    s: Callable[[st.SearchStrategy[Any]], Any],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    def part() -> dict[str, Any]:
        if s(st.booleans()):
            return {"type": "image", "file": s(hostile)}
        return {"type": "text", "text": s(hostile)}

    context = [
        {
            "role": s(hostile),
            "content": [part(), part()],
            "tool_calls": [{"id": s(hostile), "name": s(hostile), "arguments": s(hostile)}],
            "tool_call_id": s(hostile),
        }
        for _ in range(2)
    ]
    main = {
        "kind": "main",
        "round": 1,
        "context": context,
        "context_policy": {
            "policy": s(hostile),
            "evicted": [{"round": 0, "reason": s(hostile)}],
            "tried_phrases_note": [s(hostile)],
            "zones": {s(hostile): s(hostile)},
        },
        "reply": s(hostile),
        "reasoning": s(hostile),
        "thinking": s(hostile),
        "cut_after_first_tool": s(hostile),
        "tool_call": {"name": s(hostile), "parameters": {s(hostile): s(hostile)}},
        "outcome": {"kind": s(hostile), "text": s(hostile), "image": s(hostile)},
        "usage": {"prompt_tokens": s(hostile)},
    }
    check = {
        "kind": "check",
        "round": 1,
        "mask": 1,
        "context": context,
        "reply": s(hostile),
        "verdict": s(hostile),
    }
    result = {
        "query": s(hostile),
        "status": s(hostile),
        "failure": s(hostile),
        "phrases_tried": [s(hostile)],
    }
    return [main, check, {"kind": s(hostile), "round": s(hostile)}], result


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_hostile_strings_in_a_trace_stay_text(tmp_path: Path, data: st.DataObject) -> None:
    records, result = hostile_session(data.draw)
    run_dir = tmp_path / "hostile"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run_dir / "result.json").write_text(json.dumps(result))
    run = load_run(run_dir)

    builder = parse(render_html(run))
    assert_self_contained_and_inert(builder)
    assert builder.root.find_all("img") == []  # no file the trace names is a real image
    text = builder.root.all_text()
    for value in (records[0]["reply"], records[1]["reply"], result["query"]):
        assert visible(value) in text

    console = Console(file=StringIO(), width=120, color_system=None)
    render_terminal(run, console, full=True)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b" not in shown and "\u202e" not in shown


def test_a_run_whose_replies_held_lone_surrogates_and_escapes_inspects_as_text(
    tmp_path: Path, image: np.ndarray
) -> None:
    # The run itself accepts any reply; the inspector must show it too (terminal and HTML),
    # with the odd characters visible as text, not acting and not failing to encode.
    odd = "note \ud800 and \x1b[2J\x1b]0;TITLE\x07"
    replies = [f"<think>{odd}</think>{SCRIPT[1]}", SCRIPT[4]]
    out = tmp_path / "run"
    chat = ScriptedChatModel(replies=replies)
    Sam3Agent(FakeSegmenter({"cat": cats}), chat).run(image, f"cats {odd}", output_dir=out)
    shown = runner.invoke(app, ["inspect", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "\\xd800" in shown.output and "\x1b" not in shown.output
    page = tmp_path / "run.html"
    written = runner.invoke(app, ["inspect", str(out), "--html", str(page)])
    assert written.exit_code == 0, written.output
    html_text = page.read_text(encoding="utf-8")
    assert "\\xd800" in html_text and "\x1b" not in html_text
