"""Benchmark: wall time of grading one correct submission, per sandbox, beside the time of
`python -c "import torch"` measured in the same run (the floor any PyTorch grader pays once).

    .venv/bin/python bench/grade_time.py [--runs 7] [--sandboxes local,docker] [--baseline CHECKOUT] [SUBMISSION]

Runs alternate (torch import, local grade, docker grade, torch import, ...) so machine noise hits
every command alike. `--baseline` also times the local grade of another checkout of the project
(with its own .venv, e.g. a `git worktree` of an earlier commit) in the same rotation: a before /
after comparison in one run. Each line gives the median wall time and the median CPU time (user +
system of the command and its children), which a busy machine disturbs less. The docker sandbox
needs the engine and the image (scripts/test sets both up).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    after = os.times()
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submission", nargs="?", default=str(ROOT / "examples" / "correct.py"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sandboxes", default="local", help="comma-separated: local,docker")
    parser.add_argument("--baseline", help="another checkout of the project, with its own .venv, timed too")
    args = parser.parse_args()
    commands = {'python -c "import torch"': [sys.executable, "-c", "import torch"]}
    for sandbox in args.sandboxes.split(","):
        commands[f"grade --sandbox {sandbox}"] = [sys.executable, "-m", "grader", args.submission,
                                                 "--quiet", "--sandbox", sandbox]
    if args.baseline:
        other = Path(args.baseline).resolve()
        commands["baseline grade --sandbox local"] = [str(other / ".venv" / "bin" / "python"), "-m", "grader",
                                                      args.submission, "--quiet", "--sandbox", "local"]
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in commands}
    for cmd in commands.values():
        timed(cmd)  # warm the page cache (and the engine) before measuring
    for _ in range(args.runs):
        for label, cmd in commands.items():
            times[label].append(timed(cmd))
    print(f"runs: {args.runs} each, alternating; submission: {args.submission}"
          + (f"; baseline: {args.baseline}" if args.baseline else ""))
    baseline = statistics.median(w for w, _ in times['python -c "import torch"'])
    for label, runs in times.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        median = statistics.median(walls)
        print(f"{label:<32} wall median {median:6.2f} s (min {min(walls):.2f}, max {max(walls):.2f})  "
              f"cpu median {statistics.median(cpus):6.2f} s   {median / baseline:.2f}x the torch import")


if __name__ == "__main__":
    main()
