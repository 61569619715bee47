"""Benchmark: wall time of grading one correct submission with the local sandbox, beside the time
of `python -c "import torch"` measured in the same run (the floor any PyTorch grader pays once).

    .venv/bin/python bench/single_grade.py [--runs 7] [SUBMISSION]

Runs alternate (torch import, grade, torch import, grade, ...) so machine noise hits both alike.
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
    args = parser.parse_args()
    baseline_cmd = [sys.executable, "-c", "import torch"]
    grade_cmd = [sys.executable, "-m", "grader", args.submission, "--quiet"]
    timed(baseline_cmd), timed(grade_cmd)  # warm the page cache for both
    baseline, grading = [], []
    for _ in range(args.runs):
        baseline.append(timed(baseline_cmd))
        grading.append(timed(grade_cmd))
    b, g = statistics.median(baseline), statistics.median(grading)
    print(f"runs: {args.runs} each, alternating; submission: {args.submission}")
    for label, runs in (('python -c "import torch"', baseline), ("grade (local sandbox)", grading)):
        print(f"{label:<28} median {statistics.median(runs):6.2f} s   "
              f"(min {min(runs):.2f}, max {max(runs):.2f})")
    print(f"ratio grade / torch import: {g / b:.2f}x")


if __name__ == "__main__":
    main()
