"""Benchmark: wall time of grading one correct submission, per sandbox, beside the time of
`python -c "import torch"` measured in the same run (the floor any PyTorch grader pays once).

    .venv/bin/python bench/grade_time.py [--runs 7] [--sandboxes local,docker] [SUBMISSION]

Runs alternate (torch import, local grade, docker grade, torch import, ...) so machine noise hits
every command alike. The docker sandbox needs the engine and the image (scripts/test sets both up).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submission", nargs="?", default=str(ROOT / "examples" / "correct.py"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sandboxes", default="local", help="comma-separated: local,docker")
    args = parser.parse_args()
    commands = {'python -c "import torch"': [sys.executable, "-c", "import torch"]}
    for sandbox in args.sandboxes.split(","):
        commands[f"grade --sandbox {sandbox}"] = [sys.executable, "-m", "grader", args.submission,
                                                 "--quiet", "--sandbox", sandbox]
    times: dict[str, list[float]] = {label: [] for label in commands}
    for cmd in commands.values():
        timed(cmd)  # warm the page cache (and the engine) before measuring
    for _ in range(args.runs):
        for label, cmd in commands.items():
            times[label].append(timed(cmd))
    print(f"runs: {args.runs} each, alternating; submission: {args.submission}")
    baseline = statistics.median(times['python -c "import torch"'])
    for label, runs in times.items():
        median = statistics.median(runs)
        print(f"{label:<28} median {median:6.2f} s   (min {min(runs):.2f}, max {max(runs):.2f})   "
              f"{median / baseline:.2f}x the torch import")


if __name__ == "__main__":
    main()
