"""The benchmarks, one subcommand each, over the tests' shared fakes (``tests.support``).

    python -m scripts.bench NAME [ARGS...]     # from the repository root
    python -m scripts.bench NAME --help        # that benchmark's own options
    python -m scripts.bench                    # the list below

Each prints its figures and ratios; see the module of the same name for what it measures.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

BENCHMARKS: dict[str, str] = {
    "round": "the agent's own work per round, 1..50 masks",
    "examine": "concurrent vs sequential mask checks (--http: over a local server)",
    "memory": "peak memory of a segment round vs image size, 1-100 MP",
    "tokens": "image and text tokens a session sends, vs the original",
    "context": "context policies on 30 long sessions at 4k/8k/16k (minutes)",
    "batch": "batch throughput: local engine vs Ray, 1 and 2 workers",
    "startup": "--help, --version, usage errors vs a 1 s budget",
    "sam3": "full-size SAM 3 (random weights): cached backbone vs not (minutes)",
    "wire": "SAM 3 service: RLE and upload formats, before vs after",
    "service": "SAM 3 service: peak memory at 5 vs 50 concurrent clients",
    "eval": "eval throughput, concurrency 1 vs 8",
    "checkpoint": "what resumability costs per round, next to the round's work",
    "video": "video: peak memory and tokens vs clip length, cached features, decode rate",
    "tools": "tool sets: MLLM calls and prompt tokens, paper vs extended",
}


def usage() -> str:
    lines = ["usage: python -m scripts.bench NAME [ARGS...]", "", "benchmarks:"]
    lines += [f"  {name:<11} {what}" for name, what in BENCHMARKS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"scripts.bench.{name}")
    sys.argv = [f"python -m scripts.bench {name}", *rest]  # each benchmark parses sys.argv
    module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
