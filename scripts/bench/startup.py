"""How long the command line takes to answer before any model is involved.

Each case runs in a fresh interpreter, ``--repeat`` times, with this checkout first on the
path; the median wall time is printed beside the budget (1 s: ``--help``, ``--version`` and
usage errors must answer at once) and beside ``python -c pass`` (the interpreter's own
start), so the figures read the same on a fast or a busy machine.

    python -m scripts.bench startup [--repeat 5] [--budget 1.0]

Prints figures only; nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CASES: list[tuple[str, list[str]]] = [
    ("python -c pass (baseline)", ["-c", "pass"]),
    ("import sam3_agent", ["-c", "import sam3_agent"]),
    ("sam3-agent --help", ["-m", "sam3_agent.apps.cli.main", "--help"]),
    ("sam3-agent --version", ["-m", "sam3_agent.apps.cli.main", "--version"]),
    ("sam3-agent run --help", ["-m", "sam3_agent.apps.cli.main", "run", "--help"]),
    ("sam3-agent eval --help", ["-m", "sam3_agent.apps.cli.main", "eval", "--help"]),
    ("sam3-agent batch --help", ["-m", "sam3_agent.apps.cli.main", "batch", "--help"]),
    (
        "usage error (--max-image-side 5)",
        ["-m", "sam3_agent.apps.cli.main", "run", "x.jpg", "cat", "--max-image-side", "5"],
    ),
    (
        "import sam3_agent.agent (for scale)",
        ["-c", "import sam3_agent.agent"],
    ),
]


def time_once(args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds")
    options = parser.parse_args()
    print(f"{'case':<40} {'median s':>9} {'min s':>7} {'x budget':>9} {'minus baseline':>15}")
    baseline = None
    for label, args in CASES:
        times = [time_once(args) for _ in range(options.repeat)]
        median = statistics.median(times)
        if baseline is None:
            baseline = median
        print(
            f"{label:<40} {median:>9.2f} {min(times):>7.2f} {median / options.budget:>9.2f} "
            f"{median - baseline:>15.2f}"
        )


if __name__ == "__main__":
    main()
