"""Before/after check of a restructure: a fixed set of scripted sessions, their outputs kept.

``python -m scripts.snapshot_sessions make DIR`` runs image sessions (both tool protocols,
every context policy but ``attention``, at the default and at a tight budget, mask checks
that accept and reject, a resume after a failed round) and video sessions (both protocols,
an Uncertain check given a closer look, a resume) through the CLI, in this process, on the
tiny random-weight SAM 3 models (built from configs, seed 0) and the test MLLM server
scripted by the request it gets. ``python -m scripts.snapshot_sessions compare OLD NEW``
finds each run's ``result.json`` (times aside), ``trace.jsonl`` (times aside) and every
image and video it wrote equal, byte for byte, and exits 1 naming each file that differs.

Run ``make`` on the old code and on the new (``PYTHONPATH`` chooses which), then compare.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TIGHT_TOKENS = "2600"
OUTPUTS = (".json", ".jsonl", ".png", ".mp4", ".webm", ".txt")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content if isinstance(p, dict))


class Script:
    """The MLLM's side of every session, a function of the request; ``fail_at`` makes the
    n-th request of the main loop fail with HTTP 400 (not retried), once."""

    def __init__(self, *, native: bool, verdicts: list[str], fail_at: int | None = None):
        self.native, self.verdicts, self.fail_at = native, verdicts, fail_at
        self.seen = self.checks = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        try:
            return self.reply(body)
        except Exception:  # the server would only drop the connection
            import traceback

            traceback.print_exc(file=sys.__stderr__)
            raise

    def reply(self, body: dict[str, Any]) -> Any:
        from tests.support.openai_server import Reply

        messages = body["messages"]
        first = _text(messages[0]["content"])
        if "<verdict>" in first:
            self.checks += 1
            verdict = self.verdicts[(self.checks - 1) % len(self.verdicts)]
            return Reply(f"<think>looked</think>{verdict}")
        if not body.get("tools") and "summar" in first.lower() and len(messages) <= 2:
            return Reply("The model segmented phrases and examined the masks.")
        self.seen += 1
        if self.fail_at is not None and self.seen == self.fail_at:
            self.fail_at = None
            return Reply.server_error(400)
        said = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        since = messages[said[-1] + 1 :] if said else messages[-1:]  # a tool message and more
        name, params = self.plan(" ".join(_text(m["content"]) for m in since), len(said))
        if self.native:
            return Reply("", tool_calls=((name, json.dumps(params)),))
        call = json.dumps({"name": name, "parameters": params})
        return Reply(f"<think>round {len(said) + 1}</think><tool>{call}</tool>")

    @staticmethod
    def plan(last: str, assistants: int) -> tuple[str, dict[str, Any]]:
        """Segment "person", examine (accepted), segment "face", examine (rejected), segment
        "astronaut", select a number that is not shown (a mistake), then select 1."""
        if assistants == 0:
            return "segment_phrase", {"text_prompt": "person"}
        if "found no" in last:
            return "report_no_mask", {}
        for phrase in ("person", "face"):
            if f'segment_phrase("{phrase}") found' in last:
                return "examine_each_mask", {}
        if "examine_each_mask" in last and "accepted" in last:
            return "segment_phrase", {"text_prompt": "face"}
        if "examine_each_mask" in last:
            return "segment_phrase", {"text_prompt": "astronaut"}
        if 'segment_phrase("astronaut") found' in last:
            return "select_masks_and_return", {"final_answer_masks": [7]}
        return "select_masks_and_return", {"final_answer_masks": [1]}


@contextlib.contextmanager
def _server(script: Script) -> Iterator[str]:
    from tests.support.openai_server import ScriptedServer, serve

    with serve(ScriptedServer(responder=script)) as server:
        yield server.base_url


def _cli(args: list[str]) -> int:
    from typer.testing import CliRunner

    from sam3_agent.apps.cli.main import app

    done = CliRunner().invoke(app, args)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return done.exit_code


def _sessions(root: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """(name, run) for every session; each run writes ``root/name``."""
    from sam3_agent.values.config import CONTEXT_POLICIES

    photo, clip = "inputs/photo.jpg", "inputs/clip.mp4"
    image_models = ["--sam3", "models/sam3", "--device", "cpu", "--dtype", "float32"]
    video_models = ["--sam3", "models/sam3-video", "--device", "cpu", "--dtype", "float32"]

    def session(
        command: str, source: str, models: list[str], name: str, script: Script, extra: list[str]
    ) -> Callable[[], None]:
        resume = script.fail_at is not None

        def run() -> None:
            native = ["--tool-protocol", "native"] if script.native else []
            with _server(script) as url:
                args = [command, source, "the person on the left", *models, *native, *extra]
                args += ["--llm-url", url, "--llm-model", "scripted", "--llm-api-key", "k"]
                args += ["--score-threshold", "0.0", "--out", name]
                code = _cli(args)
                if resume:  # the round failed: the same command with --resume finishes
                    (root / name / "first_exit_code.txt").write_text(f"{code}\n")
                    code = _cli([*args[:-2], "--resume", name])
            (root / name / "exit_code.txt").write_text(f"{code}\n")

        return run

    checks = ["<verdict>Accept</verdict>", "<verdict>Reject</verdict>"]
    looks = ["<verdict>Uncertain</verdict><frames>2-5</frames>", *checks]
    image = functools.partial(session, "run", photo, image_models)
    video = functools.partial(session, "track", clip, video_models)
    for native in (False, True):
        protocol = "native" if native else "tags"
        for policy in [p for p in CONTEXT_POLICIES if p != "attention"]:
            for tight in (False, True):
                name = f"image-{protocol}-{policy}-{'tight' if tight else 'default'}"
                extra = ["--context-policy", policy]
                extra += ["--max-context-tokens", TIGHT_TOKENS] if tight else []
                yield name, image(name, Script(native=native, verdicts=checks), extra)
        name = f"image-{protocol}-resume"
        yield name, image(name, Script(native=native, verdicts=checks, fail_at=3), [])
        for policy in ("sam3", "summary"):
            name = f"video-{protocol}-{policy}"
            extra = ["--context-policy", policy, "--uncertain-looks", "1"]
            yield name, video(name, Script(native=native, verdicts=looks), extra)
        name = f"video-{protocol}-resume"
        yield name, video(name, Script(native=native, verdicts=looks, fail_at=3), [])


def make(root: Path, only: str | None) -> None:
    from PIL import Image

    from tests.support.clips import write_mp4
    from tests.support.tiny_sam3 import save_tiny_sam3
    from tests.support.tiny_sam3_video import save_tiny_sam3_video

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the models are local; nothing to ask
    root.mkdir(parents=True, exist_ok=True)
    os.chdir(root)
    Path("inputs").mkdir(exist_ok=True)
    assets = Path(__file__).resolve().parents[1] / "assets"
    Image.open(assets / "astronaut.jpg").convert("RGB").resize((256, 256)).save("inputs/photo.jpg")
    if not Path("inputs/clip.mp4").is_file():  # a copied baseline's clip: the same input bytes
        write_mp4(Path("inputs/clip.mp4"), 8)
    if not Path("models/sam3").is_dir():
        save_tiny_sam3(Path("models/sam3"), seed=0)
    if not Path("models/sam3-video").is_dir():
        save_tiny_sam3_video(Path("models/sam3-video"), seed=0)
    for name, run in _sessions(root):
        if only is None or re.search(only, name):
            print(name, flush=True)
            run()


_TIMES = re.compile(  # trace_bytes: the trace's length, which the times in it change
    r"(^|_)(s|ms|seconds|time|at)$|^timings|^elapsed|^started|^ended|^created|^trace_bytes$"
)


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if not _TIMES.search(k)}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    if isinstance(value, str):
        value = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", value)
        return re.sub(r"^/.*/prompts$", "CHECKOUT/prompts", value)  # where the code ran
    return value


def _normalised(path: Path) -> bytes:
    if path.suffix == ".json":
        return json.dumps(_without_times(json.loads(path.read_text())), sort_keys=True).encode()
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return "\n".join(json.dumps(_without_times(x), sort_keys=True) for x in lines).encode()
    return path.read_bytes()


def compare(old: Path, new: Path) -> int:
    def outputs(root: Path) -> set[Path]:
        runs = [d for d in root.iterdir() if d.is_dir() and d.name not in ("models", "inputs")]
        return {
            p.relative_to(root)
            for d in runs
            for p in d.rglob("*")
            if p.is_file() and p.suffix in OUTPUTS
        }

    theirs, ours = outputs(old), outputs(new)
    differ = sorted(p for p in theirs & ours if _normalised(old / p) != _normalised(new / p))
    for p in sorted(theirs - ours):
        print(f"only in {old}: {p}")
    for p in sorted(ours - theirs):
        print(f"only in {new}: {p}")
    for p in differ:
        print(f"differs: {p}")
    runs = {p.parts[0] for p in theirs | ours}
    print(f"{len(runs)} runs, {len(theirs | ours)} files, {len(differ)} differ, "
          f"{len(theirs ^ ours)} on one side only")  # fmt: skip
    return 1 if differ or theirs ^ ours else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    made = sub.add_parser("make", help="run every session into DIR")
    made.add_argument("dir", type=Path)
    made.add_argument("--only", help="a regular expression: run only the sessions it finds")
    compared = sub.add_parser("compare", help="compare two DIRs made by make")
    compared.add_argument("old", type=Path)
    compared.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.command == "make":
        make(args.dir.resolve(), args.only)
        return 0
    return compare(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
